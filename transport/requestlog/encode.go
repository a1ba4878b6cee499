package requestlog

import (
	"strconv"
	"time"

	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/tracelog"
	"github.com/inferrail/inferrail/transport/jsonl"
)

// encoder writes entries as lines; it is owned by the writer's goroutine
// (jsonl.Encoder). It numbers block identities in the order they first
// appear in the file, as Mooncake's hash_ids, and times lines from the
// first one's arrival.
type encoder struct {
	blockSize int
	maxIDs    int
	ids       map[uint64]uint32 // identity → hash id, this file's
	first     time.Time         // the arrival of this file's first line
	started   bool
}

var _ jsonl.Encoder[Entry] = (*encoder)(nil)

// Reset starts a new file: a fresh numbering, and the next line is
// timestamp 0.
func (c *encoder) Reset() {
	c.ids = make(map[uint64]uint32, 1024)
	c.started = false
}

// Release returns e's identities to the pool.
func (c *encoder) Release(e Entry) {
	if e.ids != nil {
		idPool.Put(e.ids)
	}
}

// Append appends e's line to dst, its keys tracelog's. It refuses e when numbering its new
// identities would take this file's numbering past maxIDs; a record with
// more identities than that on its own goes into a fresh file anyway.
func (c *encoder) Append(dst []byte, e Entry) ([]byte, bool) {
	var ids []uint64
	if e.ids != nil {
		ids = *e.ids
	}
	if len(c.ids) > 0 && len(c.ids)+len(ids) > c.maxIDs {
		fresh := 0
		for _, id := range ids {
			if _, ok := c.ids[id]; !ok {
				fresh++
			}
		}
		if len(c.ids)+fresh > c.maxIDs {
			return dst, false
		}
	}
	if !c.started {
		c.first, c.started = e.Arrival, true
	}
	// Lines are written as requests end, so a request that arrived before
	// the file's first line did gets a negative timestamp.
	dst = append(dst, `{"`+tracelog.KeyTimestamp+`":`...)
	dst = strconv.AppendInt(dst, e.Arrival.Sub(c.first).Milliseconds(), 10)
	dst = append(dst, `,"`+tracelog.KeyInputLength+`":`...)
	dst = strconv.AppendInt(dst, int64(e.InputLength), 10)
	dst = append(dst, `,"`+tracelog.KeyOutputLength+`":`...)
	dst = strconv.AppendInt(dst, int64(e.OutputLength), 10)
	dst = append(dst, `,"`+tracelog.KeyHashIDs+`":[`...)
	for i, id := range ids {
		n, ok := c.ids[id]
		if !ok {
			n = uint32(len(c.ids))
			c.ids[id] = n
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendUint(dst, uint64(n), 10)
	}
	dst = append(dst, `],"`+tracelog.KeyBlockSize+`":`...)
	dst = strconv.AppendInt(dst, int64(c.blockSize), 10)
	dst = append(dst, `,"`+tracelog.KeyTime+`":"`...)
	dst = e.Arrival.UTC().AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","`+tracelog.KeyModel+`":`...)
	dst = openai.AppendString(dst, e.Model)
	dst = append(dst, `,"`+tracelog.KeyAdapter+`":`...)
	dst = openai.AppendString(dst, e.Adapter)
	dst = append(dst, `,"`+tracelog.KeySession+`":"`...)
	if e.Session != 0 {
		dst = appendHex16(dst, e.Session)
	}
	dst = append(dst, `","`+tracelog.KeyPolicy+`":`...)
	dst = openai.AppendString(dst, e.Policy)
	dst = append(dst, `,"`+tracelog.KeyReplica+`":`...)
	dst = openai.AppendString(dst, e.Replica)
	dst = append(dst, `,"`+tracelog.KeyStatus+`":`...)
	dst = strconv.AppendInt(dst, int64(e.Status), 10)
	if e.HasPredicted {
		dst = append(dst, `,"`+tracelog.KeyPredicted+`":`...)
		dst = strconv.AppendInt(dst, int64(e.Predicted), 10)
	}
	if e.HasCached {
		dst = append(dst, `,"`+tracelog.KeyCached+`":`...)
		dst = strconv.AppendInt(dst, int64(e.Cached), 10)
	}
	if e.End > 0 {
		dst = append(dst, `,"`+tracelog.KeyTTFT+`":`...)
		dst = appendMillis(dst, e.FirstByte)
		dst = append(dst, `,"`+tracelog.KeyE2E+`":`...)
		dst = appendMillis(dst, e.End)
	}
	return append(dst, "}\n"...), true
}

// appendHex16 appends x as 16 lower-case hex digits.
func appendHex16(dst []byte, x uint64) []byte {
	const digits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		dst = append(dst, digits[x>>uint(shift)&0xf])
	}
	return dst
}

// appendMillis appends d in milliseconds, to the microsecond.
func appendMillis(dst []byte, d time.Duration) []byte {
	return strconv.AppendFloat(dst, float64(d.Microseconds())/1000, 'f', -1, 64)
}
