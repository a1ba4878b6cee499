package sched

import "slices"

// RoleLabel is llm-d's label for a replica's role under P/D
// disaggregation (llm-d-router filter/bylabel/roles.go).
const RoleLabel = "llm-d.ai/role"

// The roles, as llm-d names them; "both" is llm-d's deprecated alias of
// prefill-decode.
var (
	decodeRoles  = []string{"decode", "prefill-decode", "both", "encode-prefill-decode"}
	prefillRoles = []string{"prefill", "encode-prefill", "prefill-decode", "both", "encode-prefill-decode"}
)

var decodeFilter = Type{
	Name: "decode-filter", Kind: KindFilter,
	Doc: "Keeps the replicas whose `llm-d.ai/role` label is decode, prefill-decode, both or " +
		"encode-prefill-decode, and the replicas without the label.",
	New: func(*Fields) any { return roleFilter{roles: decodeRoles, unlabeled: true} },
}

var prefillFilter = Type{
	Name: "prefill-filter", Kind: KindFilter,
	Doc: "Keeps the replicas whose `llm-d.ai/role` label is prefill, encode-prefill, prefill-decode, " +
		"both or encode-prefill-decode; drops the replicas without the label.",
	New: func(*Fields) any { return roleFilter{roles: prefillRoles} },
}

// roleFilter keeps the replicas of the given roles, and with unlabeled
// those without a role.
type roleFilter struct {
	roles     []string
	unlabeled bool
}

func (r roleFilter) Filter(c *Cycle, in, out []int) []int {
	for _, i := range in {
		role, ok := c.Cands[i].Labels[RoleLabel]
		if ok && slices.Contains(r.roles, role) || !ok && r.unlabeled {
			out = append(out, i)
		}
	}
	return out
}

var labelSelectorFilter = Type{
	Name: "label-selector-filter", Kind: KindFilter,
	Doc: "Keeps the replicas whose labels match a Kubernetes label selector: every `matchLabels` " +
		"pair, and every `matchExpressions` requirement (In, NotIn, Exists, DoesNotExist). An empty " +
		"selector keeps every replica.",
	Params: []Param{
		{Name: "matchLabels", Doc: "Labels a replica must have, with these values."},
		{Name: "matchExpressions", Doc: "Requirements a replica's labels must meet.", Elem: []Param{
			{Name: "key", Doc: "The label."},
			{Name: "operator", Doc: "In, NotIn, Exists or DoesNotExist."},
			{Name: "values", Doc: "The values for In and NotIn; none for Exists and DoesNotExist."},
		}},
	},
	New: newLabelSelector,
}

// requirement is one matchExpressions entry.
type requirement struct {
	key, op string
	values  []string
}

type labelSelector struct {
	match map[string]string
	reqs  []requirement
}

func newLabelSelector(f *Fields) any {
	s := &labelSelector{match: f.StringMap("matchLabels")}
	for _, e := range f.List("matchExpressions") {
		r := requirement{key: e.String("key"), op: e.String("operator"), values: e.Strings("values")}
		if r.key == "" {
			e.Fail("key", "required")
		}
		switch r.op {
		case "In", "NotIn":
			if len(r.values) == 0 {
				e.Fail("values", "%s needs at least one value", r.op)
			}
		case "Exists", "DoesNotExist":
			if len(r.values) > 0 {
				e.Fail("values", "%s takes no values", r.op)
			}
		default:
			e.Fail("operator", "want In, NotIn, Exists or DoesNotExist, got %q", r.op)
		}
		s.reqs = append(s.reqs, r)
	}
	return s
}

func (s *labelSelector) Filter(c *Cycle, in, out []int) []int {
	for _, i := range in {
		if s.matches(c.Cands[i].Labels) {
			out = append(out, i)
		}
	}
	return out
}

func (s *labelSelector) matches(labels map[string]string) bool {
	for k, v := range s.match {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	for _, r := range s.reqs {
		v, ok := labels[r.key]
		var met bool
		switch r.op {
		case "In":
			met = ok && slices.Contains(r.values, v)
		case "NotIn":
			met = !ok || !slices.Contains(r.values, v)
		case "Exists":
			met = ok
		case "DoesNotExist":
			met = !ok
		}
		if !met {
			return false
		}
	}
	return true
}
