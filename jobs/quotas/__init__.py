"""Quotas per project and the fair queue (``admission``): what the executor and the coordinator ask
before they start a job, and what the submit service asks before it accepts one."""
