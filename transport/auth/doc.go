// Package auth decides who may use the gateway: the client port's API keys
// (auth.api_keys), the admin port's bearer token or client certificate
// (auth.admin, tls.admin_listen.client_ca_file), and the engines' own keys
// that the gateway sends in place of its clients' (upstream.api_key_file,
// replicas[].api_key_file).
//
// A Guard holds only SHA-256 hashes of client keys and of the admin token;
// a key read from a file is hashed as it is read, and no key or token ever
// reaches a log line, a metric, an error or a response. A presented key is
// hashed and looked up by its hash's first eight bytes, then compared whole
// with crypto/subtle: the time a check takes depends on the hash of what
// was presented, which says nothing about the keys that exist, and never
// on how many bytes of a real key it shares. Who a request authenticated
// as is an *Identity (the key's id, its tenant, the models it may use),
// which the front end carries with the request for metrics, the decision
// log, traces and, later, per-tenant limits.
//
// auth reads the files it is pointed at (keys, token, engine keys) and
// nothing else; it starts no goroutine of its own: Run polls the files on
// the caller's goroutine until its context ends, and Reload and Apply run
// on the caller's. Routing decisions and status codes other than 401 and
// the model-access 404 are not made here.
package auth
