"""What nsys (2023.4.4, the version CI runs) says when it fails, and what gprof-orch tells the user
then: the words to look for in its output, the limits measured, the error to raise."""

from __future__ import annotations

import re
from pathlib import Path

from orchestrator import proc
from orchestrator.errors import ParseError, ToolFailedError

# measured with nsys 2023.4.4 on the H200 (scripts/h200_session.sh nsys-limit): with its default
# --cuda-flush-interval=0, one variant of 10,000 iterations was processed and 20,000 ended in
# "Status: AnalysisFailed" (no report); with --cuda-flush-interval=1000 (nsys-flush, nsys-limit)
# 20,000, 40,000, 60,000 (three variants) and 100,000 were processed
SAFE_LAUNCHES, ANALYSIS_FAILED_AT = 10_000, 20_000
CUDA_FLUSH_MS = 1000
# how `nsys export` begins the line that says a report cannot be read: an empty, cut-short or
# foreign file ("Cannot read from stream.", "Version tag is not found in the stream.")
UNREADABLE_REPORT = "Exportation error:"
# how nsys 2023.4.4 says its agent process went away mid-run ("Connection to Agent lost. This is most
# likely a bug. Internal reason: 'Connection reset by peer'."): no report, whatever the program did
AGENT_LOST = "Connection to Agent lost"
# what to do when nsys lost a thread's events on a CUDA runtime call it does not know (nsys 2023.4.4
# under CUDA 12.8+ programs: cudaGetDriverEntryPointByVersion, cudaEventElapsedTime_v12080)
NEWER_NSYS = (
    "use an nsys at least as new as the CUDA runtime (scripts/install-nsys.sh installs Nsight Systems "
    "2024.2.3, which records CUDA 13 PyTorch programs whole), or start the capture after the program's "
    "warm-up: torch.cuda.profiler.start() in the program and --nsys-arg=--capture-range=cudaProfilerApi"
)


def no_report(res: proc.Result, log: str) -> ToolFailedError:
    """nsys ended without a report. When its analysis failed (nsys 2023.4.4 on the H200 past
    about 10,000 launches: "Wrong event order has been detected"), say that, with its own words."""
    text = proc.log_tail(res.stderr, 400) + "\n" + proc.log_tail(res.stdout, 400)
    said = re.search(r'ErrorText\s+Value: "([^"\\]+)', text)
    if "AnalysisFailed" in text or said:
        detail = said.group(1).strip().rstrip(":") if said else "Status: AnalysisFailed"
        return ToolFailedError(
            f"nsys could not process the events it recorded ({detail})",
            argv=res.argv,
            returncode=res.returncode,
            log_tail=said.group(0) if said else log,
            log=res.stderr,
            hint=f"nsys 2023.4.4 with --cuda-flush-interval=0 fails so on the H200 past about {SAFE_LAUNCHES:,} "
            f"kernel launches in one run ({ANALYSIS_FAILED_AT:,} failed; gprof-orch sets "
            f"--cuda-flush-interval={CUDA_FLUSH_MS} unless told otherwise): profile fewer --iters or "
            "variants; workload.json holds the workload's own results and report.qdstrm nsys's raw events",
        )
    lost = AGENT_LOST in text
    return ToolFailedError(
        "nsys wrote no report (No reports were generated)",
        argv=res.argv,
        returncode=res.returncode,
        log_tail=log,
        log=res.stderr,
        hint="nsys lost the connection to its own agent: a failure of nsys, not of the program "
        "(seen once with nsys 2023.4.4 on a loaded 2-core machine); run again"
        if lost
        else None,
    )


def unreadable_report(exc: ToolFailedError, report: Path | str, hint: str) -> ParseError | None:
    """A failed `nsys export` whose log says the report cannot be read (empty, cut short, not a
    report): the input is damaged (exit 4), not the tool; None for any other failure."""
    said = [ln.strip() for ln in exc.log_tail.splitlines() if ln.startswith(UNREADABLE_REPORT)]
    if not said:
        return None
    err = ParseError(report, said[-1], hint=hint)
    err.log = exc.log
    return err
