package sched

import (
	"slices"
	"strings"
)

// Type is one plugin type: the name configs give it, what it is for, the
// signals it routes on, its parameters, and its constructor. A Type is
// fixed when the package loads; callers must not modify one.
type Type struct {
	// Name is the type name, llm-d's where llm-d has the plugin.
	Name string
	Kind Kind
	// Own marks a type of Inferrail's own, which llm-d does not have.
	Own bool
	// Doc says what the plugin does, for docs/plugins.md.
	Doc string
	// Signals are the inputs the plugin routes on.
	Signals Signal
	// Params are the parameters it accepts, with their defaults.
	Params []Param
	// New returns a new instance from its parameters, reporting any
	// problem through f (Fail) and reading every parameter it declares. The
	// instance is a Filter, Scorer, Picker or ProfileHandler as Kind says,
	// or nil for a producer.
	New func(f *Fields) any
}

// registry is every plugin type, in the order docs/plugins.md lists them
// within each kind. It is the only place plugin types are named; adding
// a plugin is one new file defining its Type and one line here. It is
// never modified.
var registry = []*Type{
	&decodeFilter,
	&prefillFilter,
	&labelSelectorFilter,
	&prefixCacheAffinityFilter,
	&sessionAffinityFilter,
	&utilizationFilter,
	&boundedLoadFilter,
	&kvPressureFilter,
	&freshLoadFilter,
	&sloHeadroomTierFilter,

	&prefixCacheScorer,
	&queueScorer,
	&kvCacheUtilizationScorer,
	&loadAwareScorer,
	&activeRequestScorer,
	&tokenLoadScorer,
	&sessionAffinityScorer,
	&noHitLRUScorer,
	&runningRequestsSizeScorer,
	&estimatedTTFTScorer,
	&latencyScorer,

	&maxScorePicker,
	&randomPicker,
	&weightedRandomPicker,
	&roundRobinPicker,
	&p2cPicker,
	&prefixHashPicker,
	&kvAwarePicker,
	&costModelPicker,

	&singleProfileHandler,

	&approxPrefixCacheProducer,
	&precisePrefixCacheProducer,
	&inflightLoadProducer,
	&predictedLatencyProducer,
	&metricsDataSource,
	&coreMetricsExtractor,

	&globalStrictFairness,
	&roundRobinFairness,
	&fcfsOrdering,
	&edfOrdering,
	&sloDeadlineOrdering,
	&utilizationDetector,
	&concurrencyDetector,

	&latencySLOAdmitter,
	&costModelAdmitter,
}

// Types returns every plugin type, by kind, then in the registry's order.
// The caller must not modify them.
func Types() []*Type {
	out := slices.Clone(registry)
	slices.SortStableFunc(out, func(a, b *Type) int { return int(a.Kind) - int(b.Kind) })
	return out
}

// LookupType returns the plugin type named name.
func LookupType(name string) (*Type, bool) {
	i := slices.IndexFunc(registry, func(t *Type) bool { return t.Name == name })
	if i < 0 {
		return nil, false
	}
	return registry[i], true
}

// typeNames lists the registered type names, for an error naming what
// Inferrail implements.
func typeNames() string {
	names := make([]string, 0, len(registry))
	for _, t := range Types() {
		names = append(names, t.Name)
	}
	return strings.Join(names, ", ")
}
