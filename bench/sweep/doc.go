// Package sweep runs benchmark matrices and reports on them. A sweep is one
// TOML file: shared settings (replicas, duration, warm-up, repetitions,
// seed, policies, and scheduling profiles: EndpointPickerConfig documents
// from a file or inline, each under a name the reports label it with) and
// a list of points, each a workload with its overrides and rates, or a
// trace file (workload.Trace) with its options, at its own rate unless
// rates say otherwise, whose engines hold its longest request. Every
// (point, rate, repetition, policy or profile) is one run with a
// specification; policies and profiles run innermost, so that drift over a
// long sweep falls on every one alike, and each of a repetition gets the
// same requests at the same times on a cold fleet. Policy and plugin names
// are model/sched's registry's.
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
// is reading sweep, profile and trace files and reading and writing result
// and report files.
package sweep
