// Package sweep runs benchmark matrices and reports on them. A sweep is one
// TOML file: shared settings (replicas, duration, warm-up, repetitions,
// seed, policies) and a list of points, each a workload with its overrides
// and rates. Every (point, rate, repetition, policy) is one run with a
// specification; policies run innermost, so that drift over a long sweep
// falls on every policy alike, and every policy of a repetition gets the
// same requests at the same times on a cold fleet.
//
// Execute runs the plan with a Runner (virtual time through sim/cluster, or
// real time against in-process simulators and a gateway that the command
// starts), several at once with jobs, writing one JSON result file per run;
// a stopped sweep resumes, skipping runs whose file carries their
// specification's hash. Report builds the Markdown report and its SVG
// charts from result files alone, and the same files always give the same
// bytes.
//
// Execute joins every goroutine it starts before it returns. The only I/O
// is reading sweep files and reading and writing result and report files.
package sweep
