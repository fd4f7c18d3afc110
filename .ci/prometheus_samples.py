"""Reads the Prometheus text format on standard input and writes its metric families as
JSON, as the Prometheus Python client's own parser reads them: tests/metrics.rs checks
errbook's /metrics with it."""

import json
import sys

from prometheus_client.parser import text_string_to_metric_families

families = [
    {
        "name": family.name,
        "type": family.type,
        "help": family.documentation,
        "samples": [
            {"name": s.name, "labels": s.labels, "value": s.value} for s in family.samples
        ],
    }
    for family in text_string_to_metric_families(sys.stdin.read())
]
json.dump(families, sys.stdout)
