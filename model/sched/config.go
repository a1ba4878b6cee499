package sched

import (
	"errors"
	"fmt"
	"slices"
)

// The EndpointPickerConfig document (llm-d-router
// apix/config/v1alpha1/endpointpickerconfig_types.go).
const (
	// APIVersion is llm-d's apiVersion of the document.
	APIVersion = "llm-d.ai/v1alpha1"
	// OldAPIVersion is the Gateway API Inference Extension's, which llm-d
	// still accepts with a deprecation warning, and so does Inferrail.
	OldAPIVersion = "inference.networking.x-k8s.io/v1alpha1"
	// ConfigKind is the document's kind.
	ConfigKind = "EndpointPickerConfig"
	// DefaultProfile names the profile made when a document lists none.
	DefaultProfile = "default"
)

// documentParams are the document's keys. The sections after
// schedulingProfiles configure what Inferrail configures elsewhere; they
// are accepted with a warning saying where.
var documentParams = []Param{
	{Name: "apiVersion", Default: "", Doc: APIVersion + " (or " + OldAPIVersion + ", deprecated)."},
	{Name: "kind", Default: "", Doc: ConfigKind + "."},
	{Name: "plugins", Doc: "The plugin instances.", Elem: []Param{
		{Name: "name", Default: "", Doc: "The instance's name; its type when left out."},
		{Name: "type", Default: "", Doc: "The plugin type."},
		{Name: "parameters", Doc: "The type's parameters."},
	}},
	{Name: "schedulingProfiles", Doc: "The profiles.", Elem: []Param{
		{Name: "name", Default: "", Doc: "The profile's name."},
		{Name: "plugins", Doc: "The plugins it runs.", Elem: []Param{
			{Name: "pluginRef", Default: "", Doc: "A plugin instance's name."},
			{Name: "weight", Default: 1.0, Doc: "A scorer's weight."},
		}},
	}},
	{Name: "featureGates", Doc: "llm-d's feature gates."},
	{Name: "requestHandler", Doc: "llm-d's request parsers."},
	{Name: "parser", Doc: "llm-d's deprecated request parser."},
	{Name: "dataLayer", Doc: "llm-d's metrics sources."},
	{Name: "flowControl", Doc: "llm-d's flow control, mapped onto flow_control.", Fields: flowControlParams},
	{Name: "saturationDetector", Doc: "llm-d's deprecated saturation detector (flowControl.saturationDetector).", Fields: detectorRefParams},
}

// elsewhere says where Inferrail configures what a section of the
// document does in llm-d.
var elsewhere = map[string]string{
	"featureGates":   "Inferrail has no feature gates but " + FlowGate + ", which turns flow_control on",
	"requestHandler": "Inferrail parses the OpenAI API itself",
	"parser":         "Inferrail parses the OpenAI API itself",
	"dataLayer":      "the load section configures the engines' metrics scrape",
}

// Config is a validated EndpointPickerConfig, llm-d's default plugins
// injected. It is immutable, and builds any number of independent
// Schedulers.
type Config struct {
	name     string
	plugins  []pluginEntry
	profiles []profileEntry
	handler  int
	signals  Signal
	flow     *FlowControl
}

type pluginEntry struct {
	name, path string
	typ        *Type
	// params is the entry's parameters as the document gives them (nil for
	// none, and for an injected plugin).
	params map[string]any
	// flow is a flow-control plugin's configuration; nil for other kinds.
	flow *FlowPlugin
}

type profileEntry struct {
	name string
	refs []profileRef
}

type profileRef struct {
	plugin int // position in Config.plugins
	weight float64
}

// Parse validates an EndpointPickerConfig document, given as a YAML or
// JSON decoder yields it (objects as map[string]any, lists as []any), and
// applies llm-d's default injection: with no schedulingProfiles, a
// "default" profile of the listed filters, scorers and pickers in their
// order; max-score-picker appended to a profile with no picker;
// single-profile-handler added when there is one profile and no handler; a
// scorer's weight 1 when left out. A Scheduler built from it is named name.
//
// Every problem is reported at once, each with its path, as
// "plugins[2].parameters.blockSize: unknown key"; a plugin type Inferrail
// does not implement is refused by name with the list of those it does.
// The warnings are what the document asks for that Inferrail accepts and
// routes without, and llm-d's deprecations; the caller tells the operator.
func Parse(name string, doc any) (*Config, []Warning, error) {
	d := &decoding{}
	top, ok := doc.(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("an %s must be a mapping, got %s", ConfigKind, Describe(doc))
	}
	f := d.newFields("", top, documentParams)
	switch v := f.String("apiVersion"); v {
	case APIVersion:
	case OldAPIVersion:
		f.Warn("apiVersion", "%s is deprecated; use %s", OldAPIVersion, APIVersion)
	case "":
		f.Fail("apiVersion", "required: %s", APIVersion)
	default:
		f.Fail("apiVersion", "want %s, got %q", APIVersion, v)
	}
	if k := f.String("kind"); k != ConfigKind {
		f.Fail("kind", "want %s, got %q", ConfigKind, k)
	}
	for _, key := range []string{"requestHandler", "parser", "dataLayer"} {
		switch v := f.raw(key); v.(type) {
		case nil:
		case map[string]any:
			f.Warn(key, "has no effect: %s", elsewhere[key])
		default:
			f.Fail(key, "want a mapping, got %s", Describe(v))
		}
	}
	c := &Config{name: name, handler: -1}
	c.plugins = d.plugins(f.List("plugins"))
	c.parseFlow(f)
	c.profiles = c.parseProfiles(d, f)
	c.inject(d)
	d.finish()
	if len(d.errs) > 0 {
		return nil, d.warns, errors.Join(d.errs...)
	}
	for _, p := range c.profiles {
		for _, r := range p.refs {
			c.signals |= c.plugins[r.plugin].typ.Signals
		}
	}
	for _, p := range c.plugins {
		if k := p.typ.Kind; k == KindProducer || k == KindAdmitter {
			c.signals |= p.typ.Signals
		}
	}
	return c, d.warns, nil
}

// plugins decodes the plugin entries, each one's parameters included.
func (d *decoding) plugins(list []*Fields) []pluginEntry {
	var out []pluginEntry
	for _, e := range list {
		t, name := e.String("type"), e.String("name")
		params := e.raw("parameters")
		if name == "" {
			name = t
		}
		typ, ok := LookupType(t)
		switch {
		case t == "":
			e.Fail("type", "required")
			continue
		case !ok:
			e.Fail("type", "plugin type %q is not implemented; Inferrail implements %s", t, typeNames())
			continue
		}
		if slices.ContainsFunc(out, func(p pluginEntry) bool { return p.name == name }) {
			e.Fail("name", "%q names two plugins", name)
			continue
		}
		pf := d.parameters(e.key("parameters"), params, typ.Params)
		if pf == nil {
			continue
		}
		inst := typ.New(pf)
		checkKind(typ, inst)
		m, _ := params.(map[string]any)
		p := pluginEntry{name: name, path: e.path, typ: typ, params: m}
		if typ.Kind == KindFlow {
			p.flow = inst.(*FlowPlugin)
		}
		out = append(out, p)
	}
	return out
}

// checkKind panics when a type's instance is not what its kind says: a
// registry bug, which the registry's tests find.
func checkKind(t *Type, inst any) {
	var ok bool
	switch t.Kind {
	case KindFilter:
		_, ok = inst.(Filter)
	case KindScorer:
		_, ok = inst.(Scorer)
	case KindPicker:
		_, ok = inst.(Picker)
	case KindHandler:
		_, ok = inst.(ProfileHandler)
	case KindProducer:
		_, producer := inst.(Producer)
		ok = inst == nil || producer
	case KindFlow:
		_, ok = inst.(*FlowPlugin)
	case KindAdmitter:
		_, ok = inst.(Admitter)
	}
	if !ok {
		panic(fmt.Sprintf("BUG: sched: plugin type %s makes a %T, not a %s", t.Name, inst, t.Kind))
	}
}

// find returns the position of the plugin named name, -1 if none.
func (c *Config) find(name string) int {
	return slices.IndexFunc(c.plugins, func(p pluginEntry) bool { return p.name == name })
}

// parseProfiles decodes the schedulingProfiles, or makes the default
// profile when there are none.
func (c *Config) parseProfiles(d *decoding, f *Fields) []profileEntry {
	list := f.List("schedulingProfiles")
	if len(list) == 0 {
		p := profileEntry{name: DefaultProfile}
		for i, pl := range c.plugins {
			if k := pl.typ.Kind; k == KindFilter || k == KindScorer || k == KindPicker {
				p.refs = append(p.refs, profileRef{plugin: i, weight: 1})
			}
		}
		return []profileEntry{p}
	}
	var out []profileEntry
	for _, pf := range list {
		p := profileEntry{name: pf.String("name")}
		switch {
		case p.name == "":
			pf.Fail("name", "required")
		case slices.ContainsFunc(out, func(q profileEntry) bool { return q.name == p.name }):
			pf.Fail("name", "%q names two profiles", p.name)
		}
		pickers := 0
		for _, rf := range pf.List("plugins") {
			ref, weight, weighted := rf.String("pluginRef"), rf.Float("weight"), rf.Set("weight")
			i := c.find(ref)
			switch {
			case ref == "":
				rf.Fail("pluginRef", "required")
				continue
			case i < 0:
				rf.Fail("pluginRef", "no plugin is named %q", ref)
				continue
			case slices.ContainsFunc(p.refs, func(r profileRef) bool { return r.plugin == i }):
				rf.Fail("pluginRef", "%q is in the profile twice", ref)
				continue
			}
			kind := c.plugins[i].typ.Kind
			switch kind {
			case KindHandler:
				rf.Fail("pluginRef", "%q is a profile handler, which chooses profiles and is in none", ref)
				continue
			case KindFlow:
				rf.Fail("pluginRef", "%q is a flow-control plugin, which flowControl references and no profile runs", ref)
				continue
			case KindAdmitter:
				rf.Fail("pluginRef", "%q is an admitter, which runs for every request by being listed in plugins and is in no profile", ref)
				continue
			case KindPicker:
				if pickers++; pickers > 1 {
					rf.Fail("pluginRef", "a profile has one picker; %q is another", ref)
				}
			}
			if kind != KindScorer && weighted {
				rf.Warn("weight", "only a scorer has a weight; %q is a %s", ref, kind)
			}
			if weight < 0 {
				rf.Fail("weight", "want at least 0, got %v", weight)
			}
			p.refs = append(p.refs, profileRef{plugin: i, weight: weight})
		}
		out = append(out, p)
	}
	return out
}

// inject adds llm-d's default picker and profile handler where the
// document has none.
func (c *Config) inject(d *decoding) {
	for k := range c.profiles {
		p := &c.profiles[k]
		if slices.ContainsFunc(p.refs, func(r profileRef) bool { return c.plugins[r.plugin].typ.Kind == KindPicker }) {
			continue
		}
		i := c.add(d, &maxScorePicker)
		if i >= 0 {
			p.refs = append(p.refs, profileRef{plugin: i, weight: 1})
		}
	}
	var handlers []int
	for i, p := range c.plugins {
		if p.typ.Kind == KindHandler {
			handlers = append(handlers, i)
		}
	}
	switch {
	case len(handlers) > 1:
		d.fail("plugins", "%d profile handlers; a document has one", len(handlers))
	case len(handlers) == 1:
		c.handler = handlers[0]
		if c.plugins[c.handler].typ == &singleProfileHandler && len(c.profiles) != 1 {
			d.fail("schedulingProfiles", "%s runs one profile; the document has %d", singleProfileHandler.Name, len(c.profiles))
		}
	case len(c.profiles) == 1:
		c.handler = c.add(d, &singleProfileHandler)
	default:
		d.fail("schedulingProfiles", "%d profiles need a profile handler; Inferrail implements %s, which runs one", len(c.profiles), singleProfileHandler.Name)
	}
}

// add returns the position of the plugin of type t named as t, adding it
// with its defaults when the document has none; -1 when the name is taken
// by a plugin of another type.
func (c *Config) add(d *decoding, t *Type) int {
	if i := c.find(t.Name); i >= 0 {
		if c.plugins[i].typ != t {
			d.fail(c.plugins[i].path+".name", "%q is llm-d's default %s, which Inferrail adds here; name this %s otherwise", t.Name, t.Kind, c.plugins[i].typ.Name)
			return -1
		}
		return i
	}
	c.plugins = append(c.plugins, pluginEntry{name: t.Name, path: "plugins[" + t.Name + "]", typ: t})
	return len(c.plugins) - 1
}

// Name returns the name the Config's Schedulers are built under.
func (c *Config) Name() string { return c.name }

// Signals returns what the Config's profiles route on, with what its
// listed producers stand for.
func (c *Config) Signals() Signal { return c.signals }

// Build returns a new Scheduler with fresh plugin instances.
func (c *Config) Build() (*Scheduler, error) {
	d := &decoding{}
	inst := make([]any, len(c.plugins))
	for i, p := range c.plugins {
		inst[i] = p.typ.New(d.newFields(p.path+".parameters", p.params, p.typ.Params))
	}
	d.finish()
	if len(d.errs) > 0 {
		return nil, errors.Join(d.errs...) // Parse accepted the same parameters: unreachable
	}
	s := &Scheduler{name: c.name, signals: c.signals, handler: inst[c.handler].(ProfileHandler)}
	for i, x := range inst {
		switch x := x.(type) {
		case Producer:
			s.producers = append(s.producers, x)
		case Admitter:
			s.admitters = append(s.admitters, namedAdmitter{x, &AdmitError{Admitter: c.plugins[i].name}})
		}
	}
	for _, pe := range c.profiles {
		p := &Profile{name: pe.name}
		sum := 0.0
		for _, r := range pe.refs {
			pl, x := &c.plugins[r.plugin], inst[r.plugin]
			switch pl.typ.Kind {
			case KindFilter:
				p.filters = append(p.filters, namedFilter{pl.name, x.(Filter)})
			case KindScorer:
				p.scorers = append(p.scorers, weightedScorer{name: pl.name, s: x.(Scorer), weight: r.weight})
				sum += r.weight
			case KindPicker:
				p.picker = namedPicker{pl.name, x.(Picker)}
			}
			if o, ok := x.(Observer); ok {
				p.observers = append(p.observers, o)
			}
		}
		for k := range p.scorers {
			p.scorers[k].norm = share(p.scorers[k].weight, sum)
		}
		s.profiles = append(s.profiles, p)
	}
	return s, nil
}

// share is w's share of sum rounded to a multiple of 2^-32: scaling every
// weight by the same factor changes the unrounded share by a few units in
// the last place at most, which the rounding absorbs, so the profile's
// totals, and its picks, stay the same.
func share(w, sum float64) float64 {
	if !(sum > 0) {
		return 0
	}
	const grid = 1 << 32
	return float64(int64(w/sum*grid+0.5)) / grid
}

// Document returns the Config as an EndpointPickerConfig document, its
// injected plugins included; Parse of it gives the same Config.
// Its flow control (FlowControl), which the gateway's config maps onto
// flow_control, is left out.
func (c *Config) Document() map[string]any {
	plugins := make([]any, 0, len(c.plugins))
	for _, p := range c.plugins {
		e := map[string]any{"name": p.name, "type": p.typ.Name}
		if p.params != nil {
			e["parameters"] = p.params
		}
		plugins = append(plugins, e)
	}
	profiles := make([]any, 0, len(c.profiles))
	for _, p := range c.profiles {
		refs := make([]any, 0, len(p.refs))
		for _, r := range p.refs {
			e := map[string]any{"pluginRef": c.plugins[r.plugin].name}
			if c.plugins[r.plugin].typ.Kind == KindScorer {
				e["weight"] = r.weight
			}
			refs = append(refs, e)
		}
		profiles = append(profiles, map[string]any{"name": p.name, "plugins": refs})
	}
	return map[string]any{"apiVersion": APIVersion, "kind": ConfigKind, "plugins": plugins, "schedulingProfiles": profiles}
}
