package sched

// fresh-load-filter is the worked example of docs/plugins.md: a plugin is
// this one file and one line in registry.go.

var freshLoadFilter = Type{
	Name: "fresh-load-filter", Kind: KindFilter, Own: true, Signals: SignalLoad,
	Doc: "Keeps the replicas whose engine load report is fresh (load.max_age), so the load " +
		"scorers after it compare measured queues; keeps all when none is fresh, unless " +
		"fallbackOnEmpty is false.",
	Params: []Param{
		{Name: "fallbackOnEmpty", Default: true, Doc: "Keep every replica when none has a fresh report."},
	},
	New: func(f *Fields) any { return freshLoad{fallback: f.Bool("fallbackOnEmpty")} },
}

type freshLoad struct{ fallback bool }

func (p freshLoad) Filter(c *Cycle, in, out []int) []int {
	for _, i := range in {
		if c.Cands[i].Fresh {
			out = append(out, i)
		}
	}
	if len(out) == 0 && p.fallback {
		out = append(out, in...)
	}
	return out
}
