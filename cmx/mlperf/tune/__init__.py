"""`cmx tune`: the highest target QPS that stays VALID (Server, Interactive) or the measured throughput (Offline).

search.py picks each probe's QPS; probe.py runs one probe; process.py keeps one engine for all probes and
the confirm run; step.py checks a request against the plan and runs the tune in place of the app's step.
"""
