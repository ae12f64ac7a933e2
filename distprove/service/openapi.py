"""The OpenAPI 3.1 document of the service's API, served at ``/openapi.json``."""

from __future__ import annotations

from typing import Any

_ERROR = {"description": "one line", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


def _errors(*codes: int) -> dict[str, Any]:
    return {str(c): _ERROR for c in codes}


OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "distprove serve",
        "version": "1",
        "description": "Groth16 (BN254) proofs of circom circuits, snarkjs-compatible, from a Dask cluster. "
        "With a token file every path but /healthz needs 'Authorization: Bearer <token>'.",
    },
    "components": {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "schemas": {
            "Error": {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]},
            "Accepted": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            "Result": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "key": {"type": "string"},
                    "status": {"enum": ["queued", "proving", "done", "failed"]},
                    "proof": {"type": "object", "description": "as snarkjs writes proof.json (when done)"},
                    "public": {"type": "array", "items": {"type": "string"}, "description": "as snarkjs writes public.json (when done)"},
                    "reason": {"type": "string", "description": "why it failed, one line (when failed)"},
                },
                "required": ["id", "status"],
            },
        },
    },
    "security": [{"bearer": []}],
    "paths": {
        "/v1/keys/{name}/proofs": {
            "post": {
                "summary": "Ask for a proof: a .wtns, or circom inputs computed with the key's witness generator",
                "parameters": [
                    {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
                    {"name": "Idempotency-Key", "in": "header", "required": False, "schema": {"type": "string", "maxLength": 255},
                     "description": "a retried request with the same key answers the first one's id (200)"},
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
                        "application/json": {"schema": {"type": "object", "description": "circom input signals"}},
                    },
                },
                "responses": {
                    "202": {"description": "accepted (journaled)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Accepted"}}}},
                    "200": {"description": "accepted before, under this Idempotency-Key", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Accepted"}}}},
                    **_errors(400, 401, 404, 413, 415, 429),
                },
            }
        },
        "/v1/proofs/{id}": {
            "get": {
                "summary": "What became of a request",
                "parameters": [
                    {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
                    {"name": "wait", "in": "query", "required": False, "schema": {"type": "number"},
                     "description": "seconds to wait for the end (at most distprove.serve.max-wait)"},
                ],
                "responses": {"200": {"description": "its status", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Result"}}}},
                              **_errors(400, 401, 404)},
            }
        },
        "/v1/keys": {"get": {"summary": "The keys served", "responses": {"200": {"description": "{keys: [...]}"}, **_errors(401)}}},
        "/v1/keys/{name}/verification_key": {
            "get": {
                "summary": "A key's verification_key.json",
                "parameters": [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "as snarkjs zkey export verificationkey writes it"}, **_errors(401, 404)},
            }
        },
        "/healthz": {"get": {"summary": "Liveness (no token needed)", "security": [], "responses": {"200": {"description": "ok"}}}},
        "/metrics": {"get": {"summary": "Prometheus metrics", "responses": {"200": {"description": "text exposition format"}, **_errors(401)}}},
    },
}
