#!/usr/bin/env python3
"""A loopback OTLP/HTTP receiver for the interop suite's telemetry check (otlp.py), run with
the interop venv's Python: `POST /v1/traces` and `/v1/metrics` with protobuf bodies decoded
by the official messages of PyPI's `opentelemetry-proto` (ExportTraceServiceRequest,
ExportMetricsServiceRequest) and written, one JSON object per span or histogram data point,
to the file named by --out; a body that does not decode is answered 400 and written as an
`error` line. The port it listens on goes to --port-file once it listens.

Usage: venv/bin/python otlp_receiver.py --port-file PORT --out FILE
"""

import argparse
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest, ExportMetricsServiceResponse)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse)
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

LOCK = threading.Lock()


def value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def attributes(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


def spans(body):
    req = ExportTraceServiceRequest()
    req.ParseFromString(body)
    for rs in req.resource_spans:
        resource = attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for s in ss.spans:
                yield {"span": s.name, "kind": Span.SpanKind.Name(s.kind),
                       "trace": s.trace_id.hex(), "id": s.span_id.hex(),
                       "parent": s.parent_span_id.hex(), "attributes": attributes(s.attributes),
                       "status": Status.StatusCode.Name(s.status.code),
                       "service": resource.get("service.name"), "scope": ss.scope.name}


def metrics(body):
    req = ExportMetricsServiceRequest()
    req.ParseFromString(body)
    for rm in req.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.WhichOneof("data") != "histogram":
                    yield {"metric": m.name, "type": m.WhichOneof("data")}
                    continue
                for p in m.histogram.data_points:
                    yield {"metric": m.name, "type": "histogram", "unit": m.unit,
                           "temporality": m.histogram.aggregation_temporality,
                           "bounds": list(p.explicit_bounds), "count": p.count,
                           "buckets": list(p.bucket_counts), "attributes": attributes(p.attributes)}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        decode, answer = {"/v1/traces": (spans, ExportTraceServiceResponse),
                          "/v1/metrics": (metrics, ExportMetricsServiceResponse)}.get(
                              self.path, (None, None))
        if decode is None:
            self.send_response(404)
            self.end_headers()
            return
        try:
            lines = list(decode(body))
            status = 200
        except DecodeError as e:
            lines, status = [{"error": f"{self.path}: {e}"}], 400
        with LOCK, open(self.server.out, "a") as f:
            for line in lines:
                f.write(json.dumps(line) + "\n")
        out = answer().SerializeToString() if status == 200 else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.out = a.out
    with open(a.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(a.port_file + ".tmp", a.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
