// Package loadgen holds what the benchmark tools under bench/ share: vLLM
// request bodies and the checks of their answers (SSE framing included),
// open-loop send schedules, percentiles and added-latency arithmetic, /proc
// readers for CPU time and memory, and child processes (simulators, proxies)
// that die with the tool that started them.
//
// It is for benchmarks only: nothing in the gateway imports it. It keeps no
// package-level mutable state and starts goroutines only inside calls that
// join them before returning (RunOpenLoop), or that a Proc owns until Stop.
package loadgen
