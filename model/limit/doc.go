// Package limit is the arithmetic of the gateway's per-tenant rate limits:
// token buckets for requests per second and tokens per minute, and a
// tenant's pair of them, which admits a request only when both have room,
// reserves its tokens, and settles the reservation to the count the engine
// reported in usage.
//
// limit is pure: it starts no goroutines, does no I/O, keeps no globals and
// reads no clock; every call takes the time. Nothing in it is safe for
// concurrent use: transport/ratelimit holds each tenant's buckets under a
// lock of its own.
package limit
