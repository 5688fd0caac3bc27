#include <vector>
#include <deque>
#include <utility>
// The ns-3 side of arsched.sim.packets: a schedule's transfers over TCP connections, one per
// (source, destination) rank pair, each transfer started alpha after its dependencies are done.
namespace arschedns {
using namespace ns3;

struct Run {
  double alpha = 0, t0 = 0;
  std::vector<Ptr<Node>> nodes;
  std::vector<Ipv4Address> addr;
  // transfers
  std::vector<int> conn_of;
  std::vector<double> bytes, start_at, done_at;
  std::vector<int> wait_left, member_of, group_left, dep_ptr, deps;  // groups as in arsched.sim.deps
  int width = 1;
  // connections
  std::vector<int> csrc, cdst;
  std::vector<Ptr<Socket>> tx;
  std::vector<double> backlog, got, sent_total;
  std::vector<std::deque<std::pair<int, double>>> pending;  // (transfer, cumulative end)
  int done_count = 0;

  void AddNodes(int n) {
    NodeContainer c; c.Create(n);
    InternetStackHelper stack; stack.Install(c);
    for (int i = 0; i < n; i++) { nodes.push_back(c.Get(i)); addr.push_back(Ipv4Address()); }
  }
  void AddCable(int u, int v, const std::string& rate_uv, const std::string& rate_vu, const std::string& delay, int net) {
    PointToPointHelper p2p;
    p2p.SetChannelAttribute("Delay", StringValue(delay));
    p2p.SetDeviceAttribute("Mtu", UintegerValue(9000));
    NetDeviceContainer d = p2p.Install(nodes[u], nodes[v]);
    d.Get(0)->SetAttribute("DataRate", StringValue(rate_uv));
    d.Get(1)->SetAttribute("DataRate", StringValue(rate_vu));
    Ipv4AddressHelper ip;
    uint32_t base = (10u << 24) + (uint32_t)net * 4u;
    ip.SetBase(Ipv4Address(base), Ipv4Mask("255.255.255.252"));
    Ipv4InterfaceContainer ifs = ip.Assign(d);
    if (addr[u] == Ipv4Address()) addr[u] = ifs.GetAddress(0);
    if (addr[v] == Ipv4Address()) addr[v] = ifs.GetAddress(1);
  }
  static void Accepted(Run* r, int c, Ptr<Socket> s, const Address& a) {
    s->SetRecvCallback(MakeBoundCallback(&Run::Received, r, c));
  }
  static bool Accept(Ptr<Socket> s, const Address& a) { return true; }
  static void Received(Run* r, int c, Ptr<Socket> s) {
    Ptr<Packet> p;
    while ((p = s->Recv())) r->got[c] += p->GetSize();
    auto& q = r->pending[c];
    while (!q.empty() && r->got[c] >= q.front().second - 0.5) {
      int t = q.front().first; q.pop_front();
      r->Done(t);
    }
  }
  static void CanSend(Run* r, int c, Ptr<Socket> s, uint32_t avail) { r->TrySend(c); }
  void Connect(int n_conn, double start) {
    t0 = start;
    Simulator::Schedule(Seconds(0), &Run::Setup, this, n_conn);
  }
  void Setup(int n_conn) {
    backlog.assign(n_conn, 0); got.assign(n_conn, 0); sent_total.assign(n_conn, 0);
    pending.resize(n_conn); tx.resize(n_conn);
    for (int c = 0; c < n_conn; c++) {
      uint16_t port = 1000 + c;
      Ptr<Socket> l = Socket::CreateSocket(nodes[cdst[c]], TcpSocketFactory::GetTypeId());
      l->Bind(InetSocketAddress(Ipv4Address::GetAny(), port));
      l->Listen();
      l->SetAcceptCallback(MakeCallback(&Run::Accept), MakeBoundCallback(&Run::Accepted, this, c));
      Ptr<Socket> s = Socket::CreateSocket(nodes[csrc[c]], TcpSocketFactory::GetTypeId());
      s->Bind();
      s->Connect(InetSocketAddress(addr[cdst[c]], port));
      s->SetSendCallback(MakeBoundCallback(&Run::CanSend, this, c));
      tx[c] = s;
    }
    for (size_t t = 0; t < wait_left.size(); t++)
      if (wait_left[t] == 0) Simulator::Schedule(Seconds(t0 + alpha), &Run::Start, this, (int)t);
  }
  void Start(int t) {
    start_at[t] = Simulator::Now().GetSeconds();
    int c = conn_of[t];
    sent_total[c] += bytes[t];
    pending[c].push_back({t, sent_total[c]});
    backlog[c] += bytes[t];
    TrySend(c);
  }
  void TrySend(int c) {
    Ptr<Socket> s = tx[c];
    while (backlog[c] > 0.5) {
      uint32_t avail = s->GetTxAvailable();
      if (avail == 0) return;
      uint32_t n = (uint32_t)std::min<double>(backlog[c], std::min<uint32_t>(avail, 1u << 16));
      int k = s->Send(Create<Packet>(n));
      if (k <= 0) return;
      backlog[c] -= k;
    }
  }
  void Done(int t) {
    done_at[t] = Simulator::Now().GetSeconds();
    done_count++;
    for (int j = 0; j < width; j++) {
      int g = member_of[t * width + j];
      if (g < 0 || --group_left[g] > 0) continue;
      for (int i = dep_ptr[g]; i < dep_ptr[g + 1]; i++) {
        int d = deps[i];
        if (--wait_left[d] == 0) Simulator::Schedule(Seconds(alpha), &Run::Start, this, d);
      }
    }
  }
};
}
