package tracelog

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// Decode never panics; what it accepts has Mooncake's four fields and
// decodes the same again once written back with the format's names, and
// what it refuses as a field's fault names a field of the line.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(docLine), true)
	f.Add([]byte(`{"timestamp":0,"input_length":3,"output_length":1,"hash_ids":[9],"extra":{"a":[1]}}`), false)
	f.Add([]byte(`{"timestamp":0,"input_length":1,"output_length":2,"hash_ids":null}`), true)
	f.Add([]byte(`[]`), false)
	f.Add([]byte(`{"x":1}`), true)
	f.Fuzz(func(t *testing.T, b []byte, strict bool) {
		l, err := Decode(b, strict)
		if err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				var raw map[string]json.RawMessage
				ok := json.Unmarshal(b, &raw) == nil
				if _, named := raw[fe.Field]; ok && !named && !errors.Is(err, ErrMissing) {
					t.Fatalf("%q: error %v names a field the line does not have", b, err)
				}
			}
			return
		}
		if l.HashIDs == nil {
			t.Fatalf("%q: accepted without hash ids", b)
		}
		again, err := Decode(encode(t, &l), true)
		if err != nil || !reflect.DeepEqual(again, l) {
			t.Fatalf("%q: %+v written back reads %+v, %v", b, l, again, err)
		}
	})
}

// encode writes l with the format's names, its nil fields left out.
func encode(t *testing.T, l *Line) []byte {
	m := map[string]any{KeyTimestamp: l.Timestamp, KeyInputLength: l.InputLength, KeyOutputLength: l.OutputLength,
		KeyHashIDs: l.HashIDs, KeyModel: l.Model, KeyAdapter: l.Adapter, KeyPolicy: l.Policy, KeyReplica: l.Replica,
		KeyStatus: l.Status}
	for k, v := range map[string]any{KeyBlockSize: l.BlockSize, KeyTime: l.Time, KeySession: l.Session,
		KeyPredicted: l.Predicted, KeyCached: l.Cached, KeyTTFT: l.TTFT, KeyE2E: l.E2E} {
		if !reflect.ValueOf(v).IsNil() {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
