package admin

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/dump"
	"github.com/inferrail/inferrail/model/prefix"
)

// snapshots serves a fixed snapshot as the fleet would.
type snapshots struct{ s *dump.Snapshot }

func (f snapshots) DumpIndex(time.Duration) (*dump.Snapshot, error) {
	if f.s == nil {
		return nil, errors.New("replica r0: index snapshot: timeout")
	}
	return f.s, nil
}

func testSnapshot() *dump.Snapshot {
	return &dump.Snapshot{Replicas: []dump.Replica{{ID: "r0", Seq: 3, HasSeq: true, Blocks: []prefix.Hash{{Hi: 1, Lo: 2}}}}}
}

// A peer reads GET /admin/index/snapshot with the admin token and gets the
// fleet's snapshot back; without the token it is refused, and the refusal
// is the error FetchSnapshot returns.
func TestFetchSnapshot(t *testing.T) {
	base := serveAdmin(t, authConfig(t, nil), nil)
	c := &http.Client{Timeout: 5 * time.Second}
	got, err := FetchSnapshot(context.Background(), c, base, []byte(adminToken))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, testSnapshot()) {
		t.Fatalf("fetched %+v, want %+v", got, testSnapshot())
	}
	if _, err := FetchSnapshot(context.Background(), c, base, nil); err == nil || !strings.Contains(err.Error(), "status 401") {
		t.Fatalf("without the token: %v, want status 401", err)
	}
	if _, err := FetchSnapshot(context.Background(), c, base+"/admin/replicas#", []byte(adminToken)); err == nil {
		t.Fatal("a page that is no snapshot decoded")
	}
}

// The route answers 503 when a replica does not answer, and exists only
// with WithIndexSnapshot.
func TestSnapshotRoute(t *testing.T) {
	if code, _ := get(New(noReplicas{}, nil), SnapshotPath); code != 404 {
		t.Fatalf("without WithIndexSnapshot: %d", code)
	}
	if code, body := get(New(noReplicas{}, nil).WithIndexSnapshot(snapshots{}), SnapshotPath); code != 503 || !strings.Contains(string(body), "timeout") {
		t.Fatalf("a replica that does not answer: %d %s", code, body)
	}
	code, body := get(New(noReplicas{}, nil).WithIndexSnapshot(snapshots{testSnapshot()}), SnapshotPath)
	if s, err := dump.Decode(body, 0); code != 200 || err != nil || !reflect.DeepEqual(s, testSnapshot()) {
		t.Fatalf("%d %v %+v", code, err, s)
	}
}
