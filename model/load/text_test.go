package load

import (
	"strings"
	"testing"
)

// TestParseSample reads the part of a sample line after its name.
func TestParseSample(t *testing.T) {
	f := func(line, labels, value, ts string, ok bool) {
		t.Helper()
		_, i := lineName([]byte(line))
		s, gotOK := parseSample([]byte(line), i)
		if gotOK != ok {
			t.Errorf("%q: ok %v, want %v", line, gotOK, ok)
			return
		}
		if !ok {
			return
		}
		if string(s.labels) != labels || string(s.value) != value || string(s.ts) != ts {
			t.Errorf("%q: got labels %q value %q ts %q, want %q %q %q", line, s.labels, s.value, s.ts, labels, value, ts)
		}
	}
	f(`m 1`, "", "1", "", true)
	f(`m{} 1`, "", "1", "", true)
	f(`m{}1`, "", "1", "", true)
	f(`m{a="b"} +Inf`, `a="b"`, "+Inf", "", true)
	f(`m{a="b",} -Inf 17`, `a="b",`, "-Inf", "17", true)
	f("m\t{ a = \"b\" , c=\"d\" }\t NaN \t-5 ", ` a = "b" , c="d" `, "NaN", "-5", true)
	f(`m{a="x\"}y\\",b="\n"} 1.5e+06`, `a="x\"}y\\",b="\n"`, "1.5e+06", "", true)
	f(`m 1 # {trace_id="abc"} 2.0 1.7e9`, "", "1", "", true)
	f(`m 1 1700000000000 # {a="b"} 2`, "", "1", "1700000000000", true)
	f(`m`, "", "", "", false)
	f(`m `, "", "", "", false)
	f(`m{a="b"}`, "", "", "", false)
	f(`m{a="b"`, "", "", "", false)
	f(`m{a="b} 1`, "", "", "", false)
	f(`m{a="b\"} 1`, "", "", "", false)
	f(`m{a="b\`, "", "", "", false)
	f(`m{a=b} 1`, "", "", "", false)
	f(`m{a} 1`, "", "", "", false)
	f(`m{="b"} 1`, "", "", "", false)
	f(`m{a:b="c"} 1`, "", "", "", false)
	f(`m{a="b" c="d"} 1`, "", "", "", false)
	f(`m{,} 1`, "", "", "", false)
	f(`m 1 2 3`, "", "", "", false)
}

func TestLineName(t *testing.T) {
	f := func(line, want string) {
		t.Helper()
		name, _ := lineName([]byte(line))
		if string(name) != want {
			t.Errorf("%q: name %q, want %q", line, name, want)
		}
	}
	f("vllm:num_requests_running{engine=\"0\"} 1", "vllm:num_requests_running")
	f("  \tsglang:token_usage 0.5", "sglang:token_usage")
	f("_a:b_9 1", "_a:b_9")
	f("# HELP vllm:x y", "")
	f("", "")
	f("9abc 1", "")
	f(`{"utf8.name"} 1`, "")
}

func TestLabelIter(t *testing.T) {
	labels := ` engine = "0" ,model_name="a\"b\\",priority="",`
	if _, ok := scanLabels([]byte(labels+"}"), 0); !ok {
		t.Fatal("scanLabels refused the list")
	}
	it := labelIter{b: []byte(labels)}
	var got []string
	for {
		n, v, ok := it.next()
		if !ok {
			break
		}
		got = append(got, string(n)+"="+string(v))
	}
	want := `engine=0|model_name=a\"b\\|priority=`
	if strings.Join(got, "|") != want {
		t.Errorf("got %q, want %q", strings.Join(got, "|"), want)
	}
}

func TestParseCount(t *testing.T) {
	f := func(in string, limit, want int64, ok bool) {
		t.Helper()
		n, gotOK := parseCount([]byte(in), limit)
		if gotOK != ok || (ok && n != want) {
			t.Errorf("%q: got %d %v, want %d %v", in, n, gotOK, want, ok)
		}
	}
	f("4096", 1<<40, 4096, true)
	f("0", 10, 0, true)
	f("None", 1<<40, 0, false)
	f("", 1<<40, 0, false)
	f("-1", 1<<40, 0, false)
	f("1.5", 1<<40, 0, false)
	f("11", 10, 0, false)
	f("999999999999999999", 1<<62, 999999999999999999, true)
	f("9999999999999999999", 1<<62, 0, false)
}

// TestHashLabelOrder: a label set's identity does not depend on its order,
// and a pair is not confused with its name and value run together.
func TestHashLabelOrder(t *testing.T) {
	a := hashLabel([]byte("engine"), []byte("0")) + hashLabel([]byte("model_name"), []byte("m"))
	b := hashLabel([]byte("model_name"), []byte("m")) + hashLabel([]byte("engine"), []byte("0"))
	if a != b {
		t.Error("order changes the identity")
	}
	if hashLabel([]byte("ab"), []byte("c")) == hashLabel([]byte("a"), []byte("bc")) {
		t.Error("name and value run together")
	}
}
