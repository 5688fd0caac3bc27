"""Command modules: each adds its commands to `arsched.cliapp.app` when imported.

`arsched.cli` imports them all (see `arsched.cliapp.import_commands`); a module here needs no
line anywhere else.
"""
