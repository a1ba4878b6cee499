package vllmmetrics_test

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/inferrail/inferrail/sim/vllmmetrics"
)

// A strict parser for the Prometheus text format 0.0.4, as much of it as
// prometheus_client writes, with the rules that format sets plus the ones
// generate_latest always keeps: every family is HELP, TYPE, then samples; no
// timestamps; labels sorted by name; no blank lines or other comments.

type parsedFamily struct {
	name, help, typ string
	samples         []parsedSample
}

type parsedSample struct {
	name   string
	labels []vllmmetrics.Label
	value  float64
}

func (s parsedSample) label(name string) (string, bool) {
	for _, l := range s.labels {
		if l.Name == name {
			return l.Value, true
		}
	}
	return "", false
}

// seriesKey identifies a series without its le label.
func (s parsedSample) seriesKey() string {
	var b strings.Builder
	for _, l := range s.labels {
		if l.Name != "le" {
			fmt.Fprintf(&b, "%s=%q,", l.Name, l.Value)
		}
	}
	return b.String()
}

func parsePage(page string) ([]parsedFamily, error) {
	if page == "" || !strings.HasSuffix(page, "\n") {
		return nil, fmt.Errorf("page does not end in a newline")
	}
	var fams []parsedFamily
	seenFam := map[string]bool{}
	seenSeries := map[string]bool{}
	lines := strings.Split(strings.TrimSuffix(page, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		ln := i + 1
		line := lines[i]
		rest, ok := strings.CutPrefix(line, "# HELP ")
		if !ok {
			return nil, fmt.Errorf("line %d: want # HELP, got %q", ln, line)
		}
		name, help, ok := strings.Cut(rest, " ")
		if !ok || !validMetricName(name) {
			return nil, fmt.Errorf("line %d: bad HELP line %q", ln, line)
		}
		if err := checkEscapes(help, `\n`); err != nil {
			return nil, fmt.Errorf("line %d: HELP text: %w", ln, err)
		}
		if seenFam[name] {
			return nil, fmt.Errorf("line %d: family %s repeated", ln, name)
		}
		seenFam[name] = true
		i++
		if i == len(lines) {
			return nil, fmt.Errorf("line %d: HELP without TYPE", ln)
		}
		typeLine := lines[i]
		rest, ok = strings.CutPrefix(typeLine, "# TYPE "+name+" ")
		if !ok {
			return nil, fmt.Errorf("line %d: want # TYPE %s, got %q", i+1, name, typeLine)
		}
		switch rest {
		case "counter", "gauge", "histogram":
		default:
			return nil, fmt.Errorf("line %d: unexpected type %q", i+1, rest)
		}
		f := parsedFamily{name: name, help: help, typ: rest}
		for i+1 < len(lines) && !strings.HasPrefix(lines[i+1], "#") {
			i++
			s, err := parseSample(lines[i])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			if !sampleBelongs(f, s.name) {
				return nil, fmt.Errorf("line %d: sample %s in family %s (%s)", i+1, s.name, f.name, f.typ)
			}
			key := s.name + "{" + s.seriesKey() + "}"
			if le, ok := s.label("le"); ok {
				key += le
			}
			if seenSeries[key] {
				return nil, fmt.Errorf("line %d: series %s repeated", i+1, key)
			}
			seenSeries[key] = true
			f.samples = append(f.samples, s)
		}
		if len(f.samples) == 0 {
			return nil, fmt.Errorf("family %s has no samples", name)
		}
		if f.typ == "histogram" {
			if err := checkHistogram(f); err != nil {
				return nil, err
			}
		}
		fams = append(fams, f)
	}
	return fams, nil
}

func sampleBelongs(f parsedFamily, name string) bool {
	if f.typ != "histogram" {
		return name == f.name
	}
	rest, ok := strings.CutPrefix(name, f.name)
	return ok && (rest == "_bucket" || rest == "_count" || rest == "_sum")
}

// checkHistogram checks, per series: le bounds strictly increasing and
// ending in +Inf, cumulative counts never decreasing, _count equal to the
// +Inf bucket, and one _sum.
func checkHistogram(f parsedFamily) error {
	type series struct {
		les              []float64
		counts           []float64
		count, sum       float64
		hasCount, hasSum bool
	}
	bySeries := map[string]*series{}
	var order []string
	get := func(k string) *series {
		if s, ok := bySeries[k]; ok {
			return s
		}
		s := &series{}
		bySeries[k] = s
		order = append(order, k)
		return s
	}
	for _, s := range f.samples {
		sr := get(s.seriesKey())
		switch strings.TrimPrefix(s.name, f.name) {
		case "_bucket":
			le, ok := s.label("le")
			if !ok {
				return fmt.Errorf("%s: bucket without le", f.name)
			}
			v, err := parseValue(le)
			if err != nil {
				return fmt.Errorf("%s: le %q: %w", f.name, le, err)
			}
			if sr.hasCount || sr.hasSum {
				return fmt.Errorf("%s: bucket after _count or _sum", f.name)
			}
			sr.les = append(sr.les, v)
			sr.counts = append(sr.counts, s.value)
		case "_count":
			if _, ok := s.label("le"); ok {
				return fmt.Errorf("%s_count has le", f.name)
			}
			sr.count, sr.hasCount = s.value, true
		case "_sum":
			if _, ok := s.label("le"); ok {
				return fmt.Errorf("%s_sum has le", f.name)
			}
			sr.sum, sr.hasSum = s.value, true
		}
	}
	for _, k := range order {
		sr := bySeries[k]
		n := len(sr.les)
		if n < 2 || !math.IsInf(sr.les[n-1], 1) {
			return fmt.Errorf("%s{%s}: want >= 2 buckets ending in +Inf, got %v", f.name, k, sr.les)
		}
		for i := 1; i < n; i++ {
			if !(sr.les[i] > sr.les[i-1]) {
				return fmt.Errorf("%s{%s}: le not increasing at %v", f.name, k, sr.les[i])
			}
			if sr.counts[i] < sr.counts[i-1] {
				return fmt.Errorf("%s{%s}: bucket le=%v count %v < previous %v", f.name, k, sr.les[i], sr.counts[i], sr.counts[i-1])
			}
		}
		if !sr.hasCount || !sr.hasSum {
			return fmt.Errorf("%s{%s}: missing _count or _sum", f.name, k)
		}
		if sr.count != sr.counts[n-1] {
			return fmt.Errorf("%s{%s}: _count %v != +Inf bucket %v", f.name, k, sr.count, sr.counts[n-1])
		}
	}
	return nil
}

func parseSample(line string) (parsedSample, error) {
	var s parsedSample
	end := strings.IndexAny(line, "{ ")
	if end < 0 {
		return s, fmt.Errorf("no value in %q", line)
	}
	s.name = line[:end]
	if !validMetricName(s.name) {
		return s, fmt.Errorf("bad metric name %q", s.name)
	}
	rest := line[end:]
	if strings.HasPrefix(rest, "{") {
		rest = rest[1:]
		for {
			eq := strings.Index(rest, `="`)
			if eq < 0 {
				return s, fmt.Errorf("bad labels in %q", line)
			}
			name := rest[:eq]
			if !validLabelName(name) {
				return s, fmt.Errorf("bad label name %q", name)
			}
			rest = rest[eq+2:]
			var val strings.Builder
			closed := false
			for i := 0; i < len(rest); i++ {
				c := rest[i]
				if c == '\\' {
					if i+1 == len(rest) {
						return s, fmt.Errorf("dangling escape in %q", line)
					}
					switch rest[i+1] {
					case '\\':
						val.WriteByte('\\')
					case '"':
						val.WriteByte('"')
					case 'n':
						val.WriteByte('\n')
					default:
						return s, fmt.Errorf("bad escape \\%c in %q", rest[i+1], line)
					}
					i++
					continue
				}
				if c == '\n' {
					return s, fmt.Errorf("raw newline in label value")
				}
				if c == '"' {
					rest = rest[i+1:]
					closed = true
					break
				}
				val.WriteByte(c)
			}
			if !closed {
				return s, fmt.Errorf("unterminated label value in %q", line)
			}
			if n := len(s.labels); n > 0 && s.labels[n-1].Name >= name {
				return s, fmt.Errorf("labels not sorted or repeated at %q", name)
			}
			s.labels = append(s.labels, vllmmetrics.Label{Name: name, Value: val.String()})
			if strings.HasPrefix(rest, ",") {
				rest = rest[1:]
				continue
			}
			if !strings.HasPrefix(rest, "}") {
				return s, fmt.Errorf("want , or } in %q", line)
			}
			rest = rest[1:]
			break
		}
	}
	v, ok := strings.CutPrefix(rest, " ")
	if !ok || v == "" || strings.Contains(v, " ") {
		return s, fmt.Errorf("want exactly one value without timestamp in %q", line)
	}
	f, err := parseValue(v)
	if err != nil {
		return s, fmt.Errorf("value %q: %w", v, err)
	}
	s.value = f
	return s, nil
}

func parseValue(v string) (float64, error) {
	switch v {
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	if strings.ContainsAny(v, "_xXpPiInN") { // ParseFloat takes more than Go's ParseFloat-compatible Prometheus numbers
		return 0, fmt.Errorf("not a plain float")
	}
	return strconv.ParseFloat(v, 64)
}

func checkEscapes(s, allowed string) error {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return fmt.Errorf("raw newline")
		}
		if s[i] != '\\' {
			continue
		}
		if i+1 == len(s) || !(s[i+1] == '\\' || strings.Contains(allowed, `\`+string(s[i+1]))) {
			return fmt.Errorf("bad escape at %d in %q", i, s)
		}
		i++
	}
	return nil
}

func validMetricName(s string) bool {
	for i, c := range s {
		switch {
		case c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case i > 0 && '0' <= c && c <= '9':
		default:
			return false
		}
	}
	return s != ""
}

func validLabelName(s string) bool {
	return validMetricName(s) && !strings.Contains(s, ":")
}

// familyByName finds a family; the name is the one on its HELP line.
func familyByName(fams []parsedFamily, name string) (parsedFamily, bool) {
	i := slices.IndexFunc(fams, func(f parsedFamily) bool { return f.name == name })
	if i < 0 {
		return parsedFamily{}, false
	}
	return fams[i], true
}

// value returns the value of the one sample of fams named name whose labels
// include want.
func value(fams []parsedFamily, name string, want ...vllmmetrics.Label) (float64, error) {
	found := 0
	var v float64
	for _, f := range fams {
		for _, s := range f.samples {
			if s.name != name {
				continue
			}
			match := true
			for _, w := range want {
				if got, ok := s.label(w.Name); !ok || got != w.Value {
					match = false
				}
			}
			if match {
				found++
				v = s.value
			}
		}
	}
	if found != 1 {
		return 0, fmt.Errorf("%d samples of %s%v", found, name, want)
	}
	return v, nil
}

// TestParserRejects shows the checks above catch what they claim to.
func TestParserRejects(t *testing.T) {
	const h = "# HELP x_seconds h\n# TYPE x_seconds histogram\n"
	f := func(name, page string) {
		t.Helper()
		if _, err := parsePage(page); err == nil {
			t.Errorf("%s: accepted:\n%s", name, page)
		}
	}
	ok := h + "x_seconds_bucket{a=\"1\",le=\"1.0\"} 1.0\nx_seconds_bucket{a=\"1\",le=\"+Inf\"} 2.0\n" +
		"x_seconds_count{a=\"1\"} 2.0\nx_seconds_sum{a=\"1\"} 3.5\n"
	if _, err := parsePage(ok); err != nil {
		t.Fatalf("rejected a valid page: %v", err)
	}
	f("buckets go down", strings.Replace(ok, "} 2.0\nx_seconds_count", "} 0.0\nx_seconds_count", 1))
	f("count != +Inf bucket", strings.Replace(ok, `x_seconds_count{a="1"} 2.0`, `x_seconds_count{a="1"} 3.0`, 1))
	f("no +Inf", strings.Replace(ok, `le="+Inf"`, `le="2.0"`, 1))
	f("le out of order", strings.Replace(ok, "x_seconds_bucket{a=\"1\",le=\"+Inf\"}", "x_seconds_bucket{a=\"1\",le=\"0.5\"} 1.0\nx_seconds_bucket{a=\"1\",le=\"+Inf\"}", 1))
	f("no sum", strings.Replace(ok, "x_seconds_sum{a=\"1\"} 3.5\n", "", 1))
	f("labels unsorted", strings.Replace(ok, `{a="1",le="1.0"}`, `{le="1.0",a="1"}`, 1))
	f("bad escape", "# HELP g h\n# TYPE g gauge\ng{a=\"\\t\"} 1.0\n")
	f("missing TYPE", "# HELP g h\ng 1.0\n")
	f("foreign sample", "# HELP g h\n# TYPE g gauge\nh 1.0\n")
	f("timestamp", "# HELP g h\n# TYPE g gauge\ng 1.0 1700000000000\n")
	f("repeated series", "# HELP g h\n# TYPE g gauge\ng{a=\"1\"} 1.0\ng{a=\"1\"} 2.0\n")
	f("no final newline", "# HELP g h\n# TYPE g gauge\ng 1.0")
	f("bad value", "# HELP g h\n# TYPE g gauge\ng 0x10\n")
}
