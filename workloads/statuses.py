"""The statuses a variant's workload.json entry takes when its numbers cannot stand for its
work, declared once for the runner that sets them and the reports that judge rows by them.

    STALE         its answer did not follow new input values (workloads/recheck.py): a result
                  replayed from a cache; the run fails
    NO_GPU_WORK   its call launched no kernel, memset or copy (workloads/streams.py): measured,
                  never ranked
    OTHER_STREAM  its GPU work ran on a stream the timer cannot join (workloads/streams.py): not
                  timed, never a number
"""

STALE = "stale result"
NO_GPU_WORK = "no GPU work"
OTHER_STREAM = "other stream"
