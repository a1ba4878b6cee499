package dump

import (
	"bytes"
	"testing"
)

// FuzzDecode: any bytes decode to a snapshot or an error, never a panic,
// and a snapshot decoded encodes back to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add(Append(nil, sample()))
	f.Add(Append(nil, &Snapshot{}))
	f.Add([]byte(magic + "\x01"))
	f.Add(sealed([]byte(magic + "\x01\x01\x00\x00")))
	f.Add(sealed(append([]byte(magic+"\x01"), 0xff, 0xff, 0xff, 0xff, 0x0f)))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Decode(b, 1<<20)
		if err != nil {
			return
		}
		if again := Append(nil, s); !bytes.Equal(again, b) {
			t.Fatalf("decoded %+v re-encodes to other bytes", s)
		}
	})
}
