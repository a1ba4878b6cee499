// Package health checks engines over HTTP for the fleet's replica actors:
// GET /health must answer 200, and GET /v1/models gives the model cards the
// gateway lists at its own /v1/models.
//
// A Prober holds no state beyond its HTTP client and starts no goroutines of
// its own. Each probe opens a fresh connection (keep-alives are off): a probe
// then also proves the engine still accepts connections, and a Prober nobody
// closes leaves no idle-connection goroutines behind. Probes are once a
// second per replica, so the extra handshake costs nothing that matters.
package health
