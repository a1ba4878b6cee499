package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/inferrail/inferrail/model/sched"
)

// SchedulerName is the routing name of a model's scheduling profile: its
// scheduler, else routing.scheduler. It routes a model that sets a
// scheduler as a policy's name routes one that sets a policy, and a split or
// shadow list may name it.
const SchedulerName = "scheduler"

// schedulerKey is the key of the fleet's scheduling profile, whose flow
// control maps onto flow_control.
const schedulerKey = "routing.scheduler"

// profiles are the scheduling profiles a config names, decoded: by routing
// name ("scheduler" for routing.scheduler, the names of
// routing.schedulers). Immutable once set.
type profiles map[string]*sched.Config

// Profile returns the scheduling profile name stands for in model m's
// routing: the entry of routing.schedulers of that name, or, for
// SchedulerName, m's scheduler, else routing.scheduler. It returns nil for
// a policy's name (sched.Lookup has those) and for a name that is neither.
// Parse decodes every profile once, reading the files they name then; for a
// Config built in code they are decoded here, each call.
func (c *Config) Profile(m *Model, name string) (*sched.Config, error) {
	if name == SchedulerName && m != nil && m.Scheduler != nil {
		if m.scheduler != nil {
			return m.scheduler, nil
		}
		return decodeProfile(m.Scheduler, name)
	}
	raw := c.Routing.Schedulers[name]
	if name == SchedulerName {
		raw = c.Routing.Scheduler
	}
	if raw == nil {
		return nil, nil
	}
	if p := c.Routing.profiles[name]; p != nil {
		return p, nil
	}
	return decodeProfile(raw, name)
}

// Warnings returns what the config's scheduling profiles ask for that the
// gateway accepts and routes without, and llm-d's deprecations, each with
// its key path, for the operator: the gateway logs them when it loads the
// config, inferrail check prints them.
func (c *Config) Warnings() []string { return slices.Clone(c.Routing.warnings) }

// decodeProfile decodes a scheduling profile outside Parse, as one error.
func decodeProfile(raw any, name string) (*sched.Config, error) {
	v := validator{limit: maxProblems}
	p := v.profile(name, name, raw)
	if len(v.errs) > 0 {
		return nil, fmt.Errorf("config: %w", errors.Join(v.errs...))
	}
	return p, nil
}

// profile decodes the scheduling profile at key, raw as the config gives
// it: an EndpointPickerConfig mapping, or the path of a YAML file holding
// one. Schedulers built from it are named name. Problems are reported with
// their key paths inside the document (key.plugins[2].type); nil when there
// is any.
func (v *validator) profile(key, name string, raw any) *sched.Config {
	doc, file := raw, ""
	if path, ok := raw.(string); ok {
		file = path
		var err error
		if doc, err = readProfile(path); err != nil {
			v.add(key, "%v", err)
			return nil
		}
	} else if _, ok := toStringMap(raw); !ok {
		v.add(key, "want an %s mapping or the path of a file holding one, got %s", sched.ConfigKind, sched.Describe(raw))
		return nil
	}
	if m, ok := toStringMap(doc); ok {
		doc = m
	}
	cfg, warns, err := sched.Parse(name, doc)
	in := ""
	if file != "" {
		in = " (in " + file + ")"
	}
	for _, w := range warns {
		v.warnings = append(v.warnings, keyPath(key, w.Path)+": "+w.Message+in)
	}
	if cfg != nil && cfg.FlowControl() != nil && key != schedulerKey {
		v.warnings = append(v.warnings, key+": its flow control (flowControl, saturationDetector, the "+sched.FlowGate+
			" gate) has no effect: flow control is fleet-wide, and only "+schedulerKey+"'s maps onto flow_control"+in)
	}
	for _, e := range unjoin(err) {
		var pe *sched.PathError
		if errors.As(e, &pe) {
			v.add(keyPath(key, pe.Path), "%s%s", pe.Message, in)
		} else if e != nil {
			v.add(key, "%v%s", e, in)
		}
	}
	if err != nil {
		return nil
	}
	return cfg
}

// readProfile reads and parses the YAML file of a scheduling profile,
// bounded as a config file is.
func readProfile(path string) (any, error) {
	if path == "" {
		return nil, errors.New("want an " + sched.ConfigKind + " mapping or the path of a file holding one, got the empty string")
	}
	b, err := readFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, MaxBytes)
	}
	doc, err := parseYAML(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return doc, nil
}

// schedulers decodes routing.scheduler and routing.schedulers, checking
// the names, and returns them by routing name.
func (v *validator) schedulers(r *Routing) profiles {
	var out profiles // nil without any, as a Config built in code has
	put := func(name string, p *sched.Config) {
		if p == nil {
			return
		}
		if out == nil {
			out = profiles{}
		}
		out[name] = p
	}
	if r.Scheduler != nil {
		put(SchedulerName, v.profile(schedulerKey, SchedulerName, r.Scheduler))
	}
	for _, name := range sortedKeys(r.Schedulers) {
		key := keyPath("routing.schedulers", name)
		switch {
		case name == SchedulerName:
			v.add(key, "%q names routing.scheduler (or a model's scheduler); name this profile otherwise", name)
			continue
		case isPolicy(name):
			v.add(key, "%q is a policy's name; name this profile otherwise", name)
			continue
		case !profileName(name):
			v.add(key, "%q: a name may hold only letters, digits, '_' and '-'", name)
			continue
		}
		if r.Schedulers[name] == nil {
			v.add(key, "want an %s mapping or the path of a file holding one, got nothing", sched.ConfigKind)
			continue
		}
		put(name, v.profile(key, name, r.Schedulers[name]))
	}
	return out
}

// profileName reports whether name may name a profile: it is a metric
// label value and a split's key, and is written in the file as a key.
func profileName(name string) bool {
	if name == "" || len(name) > 63 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// isPolicy reports whether name is a policy's (sched's registry).
func isPolicy(name string) bool {
	_, ok := sched.Lookup(name)
	return ok
}

// routingNames are the names a split, shadow list or policy key may give:
// the policies, routing.schedulers' names, and SchedulerName when there is
// such a profile.
type routingNames struct {
	named     []string // routing.schedulers, sorted
	scheduler bool
}

func (n routingNames) has(name string) bool {
	return isPolicy(name) || slices.Contains(n.named, name) || n.scheduler && name == SchedulerName
}

// want lists them for an error.
func (n routingNames) want() string {
	s := "want one of " + strings.Join(sched.Policies(), ", ")
	more := slices.Clone(n.named)
	if n.scheduler {
		more = append([]string{SchedulerName}, more...)
	}
	if len(more) > 0 {
		s += ", or a scheduler: " + strings.Join(more, ", ")
	}
	return s
}
