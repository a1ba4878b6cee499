// Package ratelimit holds the gateway's per-tenant rate limits
// (rate_limits): one pair of token buckets (model/limit) per tenant that
// has a limit, created on the tenant's first request, kept across reloads,
// each under its own lock, so tenants never wait on each other.
//
// ratelimit starts no goroutines and does no I/O; it reads the clock it
// is given. A Limiter is safe for concurrent use.
package ratelimit
