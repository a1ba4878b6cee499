// Package stress is the stress and fault suite behind `inferrail stress`
// (issue 8): scenarios that drive a real gateway in front of simulated vLLM
// engines on loopback, each bounded in time and in requests, each asserting
// its own bound, and each followed by a leak check (goroutines and open file
// descriptors back to where they were before it started).
//
// The gateway comes from a Launcher the caller supplies: cmd/inferrail runs
// the same serve function as `inferrail serve`, in this process, so the leak
// checks and memory figures cover the gateway (and the in-process
// simulators). Simulators run in process through package sim, except in the
// memory scenarios, which start `inferrail sim` child processes so that the
// resident memory measured is the gateway's and the clients', not the
// engines'.
//
// stress is for the suite only: nothing in the gateway imports it. It keeps
// no package-level mutable state, and every goroutine it starts is joined
// before the scenario that started it returns; a scenario that outlives its
// time bound by more than a grace period stops the suite (Run returns
// ErrStuck).
package stress
