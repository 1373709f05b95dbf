# Benchmarks print ratios measured side by side in one run; they are not tests.
.PHONY: bench test
bench:
	.venv/bin/python benchmarks/chain_overhead.py
	.venv/bin/python benchmarks/hook_latency.py
	.venv/bin/python benchmarks/definitions_load.py
	.venv/bin/python benchmarks/cli_responsiveness.py
	.venv/bin/python benchmarks/parallel_efficiency.py
	.venv/bin/python benchmarks/git_chain.py
	.venv/bin/python benchmarks/validation_overhead.py
	.venv/bin/python benchmarks/validation_real_sdk.py
	.venv/bin/python benchmarks/fanout_parallel.py
	.venv/bin/python benchmarks/celery_scale.py
	.venv/bin/python benchmarks/celery_faults.py

test:
	.venv/bin/python -m pytest
