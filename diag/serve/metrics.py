"""Prometheus metrics of the service (`GET /metrics`), in a registry of its own."""
from __future__ import annotations

from prometheus_client import (CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram,
                               disable_created_metrics, generate_latest)

disable_created_metrics()  # the *_created series only double the output

LATENCY_BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
# Outcomes (bounded label values): answered, duplicate, unreadable, empty, too_large, busy, timeout, error, rejected


class Metrics:
    def __init__(self, queue_depth=None):
        r = self.registry = CollectorRegistry()
        self.requests = Counter("diag_requests", "Requests by channel (http, slack, mattermost) and outcome.",
                                ["channel", "outcome"], registry=r)
        self.latency = Histogram("diag_request_duration_seconds",
                                 "From a request's arrival to its answer (Slack: to the answer posted in the thread).",
                                 ["channel"], buckets=LATENCY_BUCKETS, registry=r)
        self.analysis = Histogram("diag_analysis_duration_seconds", "Time in the worker pool (queue wait included).",
                                  buckets=LATENCY_BUCKETS, registry=r)
        self.findings = Counter("diag_findings", "Findings reported, by taxonomy category.", ["category"], registry=r)
        self.rejections = Counter("diag_rejections",
                                  "Requests refused before analysis, by reason (signature, stale, replay, token, "
                                  "not_allowed, too_large, slow_client, busy).", ["reason"], registry=r)
        self.queue = Gauge("diag_queue_depth", "Analyses admitted and not yet finished.", registry=r)
        if queue_depth is not None:
            self.queue.set_function(queue_depth)

    def reject(self, channel: str, reason: str) -> None:
        self.rejections.labels(reason).inc()
        self.requests.labels(channel, "rejected").inc()

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
