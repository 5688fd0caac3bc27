# `make demo` and `make test` set up .venv themselves on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench pictures lint clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,rl]'
	touch $(STAMP)

demo: $(STAMP)
	@mkdir -p out
	@echo "== a BCube(4,1): counts, diameter and the AllReduce lower bound"
	$(BIN)/arsched topology bcube:n=4,k=1
	@echo "== the bound for 100 MB on a 4x4 torus"
	$(BIN)/arsched bound --topology torus:dims=4x4 --size 100MB
	@echo "== a real 847-host production Clos, if shared/ is beside the project"
	@if [ -f ../shared/data/lingjun2023_topo.csv ]; then $(BIN)/arsched topology ../shared/data/lingjun2023_topo.csv; fi
	@echo "== a hand-made ring schedule, validated"
	$(BIN)/python examples/ring_schedule.py out/ring.json
	$(BIN)/arsched validate out/ring.json
	@echo "== BCube's native scheme, simulated beside its bound (plot in out/bcube.png)"
	$(BIN)/arsched schedule -t bcube:n=4,k=1 -a bcube-native --size 256MB -o out/bcube.json
	$(BIN)/arsched simulate out/bcube.json --plot out/bcube.png
	@echo "== algorithms side by side on a 4x4 torus (gaps in out/torus-gaps.png)"
	$(BIN)/arsched compare -t torus:dims=4x4 --algorithms ps,ring,multi-ring,rhd,torus-native --size 1MB,256MB --plot out/torus-gaps.png
	@echo "== a config sweep (experiments/demo.yaml: every algorithm, four networks, GADGET, hrl training) and its HTML report"
	$(BIN)/arsched sweep experiments/demo.yaml --out arsched-report/runs
	@echo "== GADGET on the Tiresias 60-job trace (experiments/gadget.yaml), if shared/ is beside the project"
	@if [ -f ../shared/data/tiresias_60_job.csv ]; then $(BIN)/arsched sweep experiments/gadget.yaml --out arsched-report/gadget; fi
	$(BIN)/arsched report arsched-report/runs $$([ -d arsched-report/gadget ] && echo arsched-report/gadget) --out arsched-report
	@echo "== hrl (learned scheduler, the shipped general policy; never trained on DCell(4,1)) beside the baselines, flow model"
	$(BIN)/arsched compare -t dcell:n=4,k=1 --algorithms ps,ring,greedy-trees,hrl --size 256MB

test: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples docs
	$(BIN)/pytest -n 2 -m "not slow"

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_bounds.py
	$(BIN)/python benchmarks/bench_validator.py
	$(BIN)/python benchmarks/bench_routing.py
	$(BIN)/python benchmarks/bench_sim.py
	$(BIN)/pip install --quiet "ns3>=3.44"
	$(BIN)/python benchmarks/bench_packets.py
	@if ! $(BIN)/python -c 'from arsched.sim.fluid_peer import available; raise SystemExit(not available())'; then \
		if [ "$$(id -u)" = 0 ]; then apt-get install -y -qq python3-simgrid; \
		else echo "not root, so SimGrid is not installed and bench_simgrid is skipped: sudo apt-get install python3-simgrid"; fi; \
	fi
	@if $(BIN)/python -c 'from arsched.sim.fluid_peer import available; raise SystemExit(not available())'; then \
		$(BIN)/python benchmarks/bench_simgrid.py; fi
	$(BIN)/python benchmarks/bench_algorithms.py
	$(BIN)/python benchmarks/bench_packing_scale.py
	$(BIN)/python benchmarks/bench_gpu_fabrics.py
	$(BIN)/python benchmarks/bench_scale.py
	$(BIN)/python benchmarks/bench_auto.py
	$(BIN)/python benchmarks/bench_directed.py
	$(BIN)/python benchmarks/bench_collectives.py
	$(BIN)/python benchmarks/bench_collectives.py --scale
	$(BIN)/python benchmarks/bench_runtime.py
	$(BIN)/python benchmarks/bench_faults.py
	$(BIN)/python benchmarks/bench_sweep.py
	nice -n 10 $(BIN)/python benchmarks/bench_rl.py --iterations 25 --general-iterations 25 --curve-iterations 15
	$(BIN)/python benchmarks/bench_rl_warm.py
	$(BIN)/python benchmarks/bench_cluster.py
	$(BIN)/python benchmarks/bench_cluster.py --only engines
	$(BIN)/python benchmarks/bench_cluster.py --only ilp
	$(BIN)/python benchmarks/bench_cluster.py --only scale
	$(BIN)/python benchmarks/bench_fuzz.py

pictures: $(STAMP)
	$(BIN)/python docs/pictures.py

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples docs
	$(BIN)/ruff format --check src tests benchmarks examples docs

clean:
	rm -rf $(VENV) build dist src/*.egg-info
