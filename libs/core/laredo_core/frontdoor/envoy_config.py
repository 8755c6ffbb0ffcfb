"""Envoy's bootstrap for a service's front door, as plain data (pure; see envoy_process for the process).

One listener on the service's address speaks HTTP/1.1 and HTTP/2 (cleartext, or TLS with ALPN); its filters
turn gRPC-Web (grpc_web) and Connect (connect_grpc_bridge) into gRPC, and the router sends every call to the
grpcio server on a Unix socket. Connect and gRPC-Web JSON reach grpcio as gRPC with the `x-laredo-codec: json`
header, which `codec.CodecInterceptor` honours. A cleartext client on a TLS port is answered, in cleartext,
with an error that says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from laredo_core.frontdoor.settings import CORS_ALLOWED_HEADERS, CORS_EXPOSED_HEADERS, FrontDoorSettings

CODEC_HEADER = "x-laredo-codec"
#: The content type the client sent, kept for the door's log: gRPC-Web and Connect requests reach the log with
#: the gRPC one their filters put in its place.
CLIENT_TYPE_HEADER = "x-laredo-client-content-type"
HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
TLS_REFUSAL = ("this port serves TLS only: connect with https:// (Connect, gRPC-Web) or with TLS channel "
               "credentials (gRPC)")


@dataclass(frozen=True, slots=True)
class Upstream:
    """Calls whose path starts with one of `prefixes` go to `name`, whose endpoints Envoy reads from `eds_path`
    (a file the service rewrites; Envoy watches its directory). Used by OAM to answer the Query service."""

    name: str
    prefixes: tuple[str, ...]
    eds_path: str
    tls_ca: str = ""  # set: the endpoints serve TLS, their certificates signed by this CA
    tls_cert: str = ""  # the client certificate presented to them (mutual TLS)
    tls_key: str = ""
    tls_server_name: str = ""  # SNI and the name their certificates must carry ("": not checked)


def _duration(seconds: float) -> str:
    return f"{seconds:.3f}s"


_GET = {"name": ":method", "string_match": {"exact": "GET"}}


def _header(key: str, value: str, action: str = "OVERWRITE_IF_EXISTS_OR_ADD") -> dict[str, Any]:
    return {"header": {"key": key, "value": value}, "append_action": action}


def _routes(cluster: str, prefix: str, unary_buffer: int, *, local: bool = True) -> list[dict[str, Any]]:
    """The routes to one destination: Connect unary JSON and proto, other JSON, Connect GET, native gRPC (only
    the router), everything else (gRPC-Web, Connect streams).

    To the local grpcio server JSON goes as gRPC plus the codec header; to another Laredo port (`local`
    false) it goes on as gRPC with the JSON subtype, which that port's own door turns into the same.
    """
    target = {"cluster": cluster, "timeout": "0s", "max_stream_duration": {"grpc_timeout_header_max": "0s"}}
    # Connect unary answers are buffered whole by the bridge: their own limit; streams keep the connection's
    # small buffer, so a slow reader pushes back on the service
    unary = {"request_body_buffer_limit": unary_buffer}
    # the bridge sends JSON as application/grpc+json, which grpcio refuses: gRPC plus the codec header
    json_mutations: dict[str, Any] = {
        "request_headers_to_add": [_header(CODEC_HEADER, "json"), _header("content-type", "application/grpc")],
        "response_headers_to_add": [_header("content-type", "application/grpc+json")],
    } if local else {"request_headers_to_remove": [CODEC_HEADER]}
    connect_unary = {"envoy.filters.http.header_mutation": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutationPerRoute",
        "mutations": {"request_mutations": [{"append": _header("connect-protocol-version", "1",
                                                               "ADD_IF_ABSENT")}]}}}

    def route(name: str, match: dict[str, Any], **fields: Any) -> dict[str, Any]:
        return {"name": name, "match": {"prefix": prefix, **match}, "route": target, **fields}

    def content_type(**string_match: Any) -> dict[str, Any]:
        return {"headers": [{"name": "content-type", "string_match": string_match}]}

    return [
        route("connect-json-unary", content_type(exact="application/json"), typed_per_filter_config=connect_unary,
              **json_mutations, **unary),
        route("json", content_type(contains="json"), **json_mutations),
        route("connect-get-json", {"query_parameters": [{"name": "encoding", "string_match": {"exact": "json"}}]},
              **json_mutations, **unary),
        route("connect-proto-unary", content_type(exact="application/proto"),
              typed_per_filter_config=connect_unary, request_headers_to_remove=[CODEC_HEADER], **unary),
        route("connect-get", {"headers": [_GET]}, request_headers_to_remove=[CODEC_HEADER], **unary),
        route("grpc", content_type(safe_regex={"regex": r"^application/grpc(\+proto)?(;.*)?$"}),
              typed_per_filter_config=_NATIVE_GRPC_SKIPS, request_headers_to_remove=[CODEC_HEADER, CLIENT_TYPE_HEADER]),
        route("binary", {}, request_headers_to_remove=[CODEC_HEADER]),
    ]


#: Content types of the three protocols; anything else is answered 415 by the door itself.
_PROTOCOL_CONTENT_TYPES = (r"^application/(grpc|grpc-web|grpc-web-text|proto|json|connect\+proto|connect\+json)"
                           r"([+;].*)?$")
UNSUPPORTED_TYPE = ("unsupported content-type: send application/grpc (gRPC), application/proto or "
                    "application/json (Connect), application/connect+proto or +json (Connect streams), or "
                    "application/grpc-web(+proto) or application/grpc-web-text (gRPC-Web)")


def side_effect_paths() -> list[str]:
    """The paths of every RPC that changes something (the `admin` ones): never served to a Connect GET, which
    a browser sends from any page and a proxy may repeat."""
    from laredo_core.auth.rules import ADMIN, method_rules

    return sorted(path for path, rule in method_rules().items() if rule.role is ADMIN)


def _refusals() -> list[dict[str, Any]]:
    refuse_get = [{"name": f"no-get{path}", "match": {"path": path, "headers": [_GET]},
                   "direct_response": {"status": 405, "body": {"inline_string": (
                       f"{path.rsplit('/', 1)[1]} changes state: call it with POST, not GET")}},
                   "response_headers_to_add": [_header("allow", "POST")]} for path in side_effect_paths()]
    wrong_type = {"name": "unsupported-content-type", "match": {"prefix": "/", "headers": [
        {"name": "content-type", "present_match": True},
        {"name": "content-type", "string_match": {"safe_regex": {"regex": _PROTOCOL_CONTENT_TYPES}},
         "invert_match": True}]},
        "direct_response": {"status": 415, "body": {"inline_string": UNSUPPORTED_TYPE}}}
    return [*refuse_get, wrong_type]


def _cors(origins: Sequence[str]) -> dict[str, Any]:
    matchers = [{"safe_regex": {"regex": ".*"}} if o == "*" else {"exact": o} for o in origins]
    return {"envoy.filters.http.cors": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy",
        "allow_origin_string_match": matchers,
        "allow_methods": "GET, POST, OPTIONS",
        "allow_headers": ", ".join(CORS_ALLOWED_HEADERS),
        "expose_headers": ", ".join(CORS_EXPOSED_HEADERS),
        "max_age": "600"}}


#: Connect GET sends the message base64url-encoded; clients may pad it ("=", "%3D"), which the bridge then reads
#: as an empty message. Padding carries nothing, so it is dropped before the bridge sees the query.
_UNPAD_GET_MESSAGE = """
function envoy_on_request(handle)
  local headers = handle:headers()
  if headers:get(":method") ~= "GET" then return end
  local path = headers:get(":path")
  if path == nil or not string.find(path, "base64=1", 1, true) then return end
  local fixed = path
  for _ = 1, 2 do
    fixed = string.gsub(fixed, "(message=[%w%-_]+)%%3[Dd]", "%1")
    fixed = string.gsub(fixed, "(message=[%w%-_]+)=", "%1")
  end
  if fixed ~= path then headers:replace(":path", fixed) end
end
"""

#: The HTTP filters before the router (name, type under envoy.extensions.filters.http, config), in order.
_BROWSER_FILTERS = (
    ("laredo.client_content_type", "header_mutation.v3.HeaderMutation",
     {"mutations": {"request_mutations": [{"append": _header(CLIENT_TYPE_HEADER, "%REQ(content-type)%")}]}}),
    ("envoy.filters.http.cors", "cors.v3.Cors", None),
    ("envoy.filters.http.grpc_web", "grpc_web.v3.GrpcWeb", None),
    ("envoy.filters.http.lua", "lua.v3.Lua", {"default_source_code": {"inline_string": _UNPAD_GET_MESSAGE}}),
    ("envoy.filters.http.header_mutation", "header_mutation.v3.HeaderMutation", {"mutations": {}}),
    ("envoy.filters.http.connect_grpc_bridge", "connect_grpc_bridge.v3.FilterConfig", None),
)
#: Native gRPC (the Sync hot path) passes only the router: the filters for browsers, gRPC-Web and Connect are
#: skipped for its every frame.
_NATIVE_GRPC_SKIPS = {name: {"@type": "type.googleapis.com/envoy.config.route.v3.FilterConfig", "disabled": True}
                      for name, _, _ in _BROWSER_FILTERS}


def _filter(name: str, type_name: str, config: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "typed_config": {"@type": f"type.googleapis.com/{type_name}", **(config or {})}}


#: Envoy's response flags for calls the door itself failed or cut: no upstream, overload, protocol errors,
#: timeouts, resets it made.
_DOOR_FLAGS = ("UH", "UF", "UO", "NR", "URX", "DPE", "UPE", "UMSDR", "OM", "UT", "UC", "SI", "LR", "DO")


def _access_log() -> list[dict[str, Any]]:
    """One line on stderr for each refused or broken request, with the peer: what the door turned away."""
    # A status the door made itself, a flag that says the door cut the call (not a client that left: DC, DR),
    # or a refusal of bad input: gRPC's codes, and Connect's HTTP statuses for them (400 invalid argument,
    # 429 resource exhausted, 501 unimplemented, ...). Answers such as NOT_FOUND are not refusals; 401/403 are
    # the service's auth, which logs them itself with the credential's name.
    refused = {"or_filter": {"filters": [
        {"extension_filter": {"name": "envoy.access_loggers.extension_filters.cel", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.access_loggers.filters.cel.v3.ExpressionFilter",
            "expression": "response.code >= 400 && (response.code_details != 'via_upstream' || "
                          "response.code in [400, 413, 415, 429, 500, 501])"}}},
        {"response_flag_filter": {"flags": list(_DOOR_FLAGS)}},
        # what grpcio refuses before a handler runs (too large, no such method, a body it cannot frame) and the
        # decoder's INVALID_ARGUMENT: bad input, logged here once with the peer
        {"grpc_status_filter": {"statuses": ["INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", "UNIMPLEMENTED",
                                             "INTERNAL"]}},
    ]}}
    line = ("front door refused %REQ(:METHOD)% %REQ(:PATH)% from %DOWNSTREAM_REMOTE_ADDRESS%: HTTP "
            "%RESPONSE_CODE% %RESPONSE_CODE_DETAILS% flags=%RESPONSE_FLAGS% grpc-status=%GRPC_STATUS_NUMBER% "
            f"protocol=%PROTOCOL% content-type=%REQ({CLIENT_TYPE_HEADER}?CONTENT-TYPE)%\n")
    return _stderr_log(line, filter=refused)


def _connection_log() -> list[dict[str, Any]]:
    """One line on stderr as each connection ends; door_log.DoorLog keeps those a person should read."""
    line = ("connection from %DOWNSTREAM_REMOTE_ADDRESS% closed after %DURATION% ms: received %BYTES_RECEIVED% "
            "bytes, protocol=%PROTOCOL% tls-failure=%DOWNSTREAM_TRANSPORT_FAILURE_REASON%\n")
    return _stderr_log(line)


def _stderr_log(line: str, **fields: Any) -> list[dict[str, Any]]:
    return [{**_filter("envoy.access_loggers.stderr", "envoy.extensions.access_loggers.stream.v3.StderrAccessLog",
                       {"log_format": {"text_format_source": {"inline_string": line}}}), **fields}]


def _connection_manager(settings: FrontDoorSettings, upstreams: Sequence[Upstream], *,
                        client_certs: bool, console: bool = False) -> dict[str, Any]:
    # The console's page and files (GET only, before the refusals: a browser's GET carries no content type).
    routes: list[dict[str, Any]] = [{
        "name": "console", "match": {"prefix": "/console", "headers": [_GET]},
        "route": {"cluster": "console", "timeout": "10s"},
        "typed_per_filter_config": _NATIVE_GRPC_SKIPS}] if console else []
    routes.extend(_refusals())
    for upstream in upstreams:
        for prefix in upstream.prefixes:
            routes.extend(_routes(upstream.name, prefix, settings.max_response_bytes, local=False))
    routes.extend(_routes("backend", "/", settings.max_response_bytes))
    virtual_host: dict[str, Any] = {"name": "service", "domains": ["*"], "routes": routes}
    if settings.cors_origins:
        virtual_host["typed_per_filter_config"] = _cors(settings.cors_origins)
    filters = [_filter(name, f"envoy.extensions.filters.http.{kind}", config)
               for name, kind, config in _BROWSER_FILTERS]
    filters.append(_filter("envoy.filters.http.router", "envoy.extensions.filters.http.router.v3.Router"))
    hcm: dict[str, Any] = {
        "@type": HCM,
        "stat_prefix": "front_door",
        "codec_type": "AUTO",
        "use_remote_address": True,
        "server_name": "laredo",
        # identity headers come only from this door: a client's own x-forwarded-client-cert is dropped
        "forward_client_cert_details": "SANITIZE_SET" if client_certs else "SANITIZE",
        "stream_idle_timeout": "0s",  # Sync, Subscribe and WatchStatus may be quiet for hours
        "request_headers_timeout": _duration(settings.request_headers_timeout),
        "common_http_protocol_options": {"idle_timeout": _duration(settings.idle_timeout),
                                         "headers_with_underscores_action": "REJECT_REQUEST"},
        "http2_protocol_options": {
            "max_concurrent_streams": settings.max_concurrent_streams,
            # a peer's mistake on one stream (one stream too many, a bad header) resets that stream only
            "override_stream_error_on_invalid_http_message": True,
            # many small Sync frames queue up for a slow reader before the buffer limit pushes back on the
            # service; memory is bounded by that limit, not by counting frames
            "max_outbound_frames": 1_000_000,
            # Envoy's edge defaults: what a client may send ahead, 64 KiB per stream and 1 MiB per connection
            "initial_stream_window_size": CLIENT_STREAM_WINDOW_BYTES,
            "initial_connection_window_size": CLIENT_CONNECTION_WINDOW_BYTES,
            "connection_keepalive": {"interval": _duration(settings.keepalive_interval),
                                     "timeout": _duration(settings.keepalive_timeout)}},
        "route_config": {"name": "service", "virtual_hosts": [virtual_host]},
        "http_filters": filters,
        "access_log": _access_log(),
    }
    if client_certs:
        hcm["set_current_client_cert_details"] = {"subject": True, "uri": True, "dns": True}
    return hcm


def _tls_context(settings: FrontDoorSettings) -> dict[str, Any]:
    tls = settings.tls
    common: dict[str, Any] = {
        "alpn_protocols": ["h2", "http/1.1"],
        "tls_certificates": [{"certificate_chain": {"filename": tls.cert}, "private_key": {"filename": tls.key}}],
    }
    if tls.client_ca:
        common["validation_context"] = {"trusted_ca": {"filename": tls.client_ca}}
    return {"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
            "common_tls_context": common, "require_client_certificate": tls.require_client_cert}


def _plain_refusal() -> dict[str, Any]:
    """The cleartext chain of a TLS listener: every request is told to use TLS."""
    return {"name": "envoy.filters.network.http_connection_manager", "typed_config": {
        "@type": HCM, "stat_prefix": "front_door_cleartext", "codec_type": "AUTO",
        "route_config": {"virtual_hosts": [{"name": "refuse", "domains": ["*"], "routes": [
            {"match": {"prefix": "/"}, "direct_response": {"status": 426, "body": {"inline_string": TLS_REFUSAL}},
             "response_headers_to_add": [_header("upgrade", "TLS/1.2, TLS/1.3")]}]}]},
        "http_filters": [_filter("envoy.filters.http.router", "envoy.extensions.filters.http.router.v3.Router")],
        "access_log": _access_log()}}


def bootstrap(settings: FrontDoorSettings, *, host: str, port: int, backend_socket: str, admin_socket: str,
              upstreams: Sequence[Upstream] = (), console_socket: str = "") -> dict[str, Any]:
    """The whole Envoy configuration for one service port; with `console_socket`, GET /console/... goes to the
    HTTP server there (OAM's web console: its page and the browser's Connect calls share one origin)."""
    manager = {"name": "envoy.filters.network.http_connection_manager",
               "typed_config": _connection_manager(settings, upstreams, client_certs=bool(settings.tls.client_ca),
                                                   console=bool(console_socket))}
    listener: dict[str, Any] = {
        "name": "front_door",
        "address": {"socket_address": {"address": host, "port_value": port}},
        "per_connection_buffer_limit_bytes": settings.connection_buffer_bytes,
        "filter_chains": [{"filters": [manager]}],
        "access_log": _connection_log(),
    }
    if settings.tls.enabled:
        listener["listener_filters"] = [_filter("envoy.filters.listener.tls_inspector",
                                                "envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector")]
        listener["filter_chains"] = [
            {"filter_chain_match": {"transport_protocol": "tls"}, "filters": [manager],
             "transport_socket": {"name": "envoy.transport_sockets.tls", "typed_config": _tls_context(settings)}},
            {"filter_chain_match": {"transport_protocol": "raw_buffer"}, "filters": [_plain_refusal()]},
        ]
    clusters = [_cluster("backend", {"load_assignment": {"cluster_name": "backend", "endpoints": [
        {"lb_endpoints": [{"endpoint": {"address": {"pipe": {"path": backend_socket}}}}]}]}, "type": "STATIC"},
        settings)]
    if console_socket:  # HTTP/1.1 to a local aiohttp server
        clusters.append({"name": "console", "connect_timeout": "2s", "type": "STATIC",
                         "load_assignment": {"cluster_name": "console", "endpoints": [{"lb_endpoints": [
                             {"endpoint": {"address": {"pipe": {"path": console_socket}}}}]}]}})
    for upstream in upstreams:
        discovery: dict[str, Any] = {"type": "EDS", "eds_cluster_config": {"eds_config": {
            "path_config_source": {"path": upstream.eds_path,
                                   "watched_directory": {"path": str(Path(upstream.eds_path).parent)}},
            "resource_api_version": "V3"}}}
        if upstream.tls_ca:
            discovery["transport_socket"] = _upstream_tls(upstream)
        clusters.append(_cluster(upstream.name, discovery, settings))
    return {
        "node": {"id": "laredo", "cluster": "laredo"},
        "admin": {"address": {"pipe": {"path": admin_socket}}},
        "static_resources": {"listeners": [listener], "clusters": clusters},
        "overload_manager": {"resource_monitors": [{
            "name": "envoy.resource_monitors.global_downstream_max_connections",
            "typed_config": {"@type": "type.googleapis.com/envoy.extensions.resource_monitors."
                                      "downstream_connections.v3.DownstreamConnectionsConfig",
                             "max_active_downstream_connections": settings.max_connections}}]},
    }


def _upstream_tls(upstream: Upstream) -> dict[str, Any]:
    validation: dict[str, Any] = {"trusted_ca": {"filename": upstream.tls_ca}}
    if upstream.tls_server_name:
        validation["match_typed_subject_alt_names"] = [
            {"san_type": "DNS", "matcher": {"exact": upstream.tls_server_name}}]
    common: dict[str, Any] = {"alpn_protocols": ["h2"], "validation_context": validation}
    if upstream.tls_cert:
        common["tls_certificates"] = [{"certificate_chain": {"filename": upstream.tls_cert},
                                       "private_key": {"filename": upstream.tls_key}}]
    config: dict[str, Any] = {
        "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
        "common_tls_context": common}
    if upstream.tls_server_name:
        config["sni"] = upstream.tls_server_name
    return {"name": "envoy.transport_sockets.tls", "typed_config": config}


def endpoints_document(cluster: str, addresses: Sequence[tuple[str, int]], version: str) -> dict[str, Any]:
    """The file-based EDS document naming a cluster's endpoints (IP addresses: Envoy resolves no names here)."""
    return {"version_info": version, "resources": [{
        "@type": "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
        "cluster_name": cluster,
        "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {
            "address": host, "port_value": port}}}} for host, port in addresses]}]}]}


#: Calls per connection to the service: its frames are read and written by one transport per connection, so
#: hundreds of Sync streams spread over several instead of queueing behind one; fewer connections let the
#: service write many calls' messages at once (bench/fanout.py --phases frontdoor, 100 Sync clients: at 10 calls
#: per connection the service spent 1.4-2x the CPU of direct gRPC per delivery, at 50 the same as direct batched
#: and 1.2x unbatched).
UPSTREAM_CALLS_PER_CONNECTION = 50
#: What the door reads from a connection to the service at once: the frames of many calls in one read. Each call
#: still holds no more than its window (limits.stream_window_bytes), so a slow client holds no more.
UPSTREAM_BUFFER_BYTES = 1024 * 1024
#: What a client may send ahead of the door, per stream and per connection (Envoy's advice for an edge): requests
#: are small, and a large window only lets a client park more bytes in the door.
CLIENT_STREAM_WINDOW_BYTES = 64 * 1024
CLIENT_CONNECTION_WINDOW_BYTES = 1024 * 1024
#: HTTP/2's SETTINGS_MAX_FRAME_SIZE: the largest frame either side may be asked to take (RFC 9113, 6.5.2).
MAX_FRAME_SIZE_SETTING, LARGEST_FRAME_BYTES = 0x5, 2**24 - 1


def _cluster(name: str, discovery: dict[str, Any], settings: FrontDoorSettings) -> dict[str, Any]:
    return {
        "name": name, "connect_timeout": "2s",
        "per_connection_buffer_limit_bytes": max(UPSTREAM_BUFFER_BYTES, settings.connection_buffer_bytes),
        "typed_extension_protocol_options": {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
            "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
            # Each call has its own small window towards the service, so a client that stops reading stops its
            # own call at the service (whose per-client limits then decide) and no other; the connection's
            # window, shared by every call, stays large.
            "explicit_http_config": {"http2_protocol_options": {
                "max_concurrent_streams": UPSTREAM_CALLS_PER_CONNECTION,
                "initial_stream_window_size": settings.stream_window_bytes,
                "initial_connection_window_size": 64 * 1024 * 1024,
                # the service may send a call's whole window as one frame: a batched Sync message (500 entries,
                # some 120 KB) crosses as one frame instead of eight of HTTP/2's default 16 KiB, which the service
                # frames and the door takes apart one by one (docs/front-door.md, "Cost")
                "custom_settings_parameters": [{"identifier": MAX_FRAME_SIZE_SETTING,
                                                "value": min(settings.stream_window_bytes, LARGEST_FRAME_BYTES)}],
            }}}},
        **discovery,
    }
