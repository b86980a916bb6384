from orchestrator.cli import main

main(prog_name="gprof-orch")
