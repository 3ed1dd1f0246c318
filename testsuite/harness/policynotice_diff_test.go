package harness

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// A SetPermissions that switches the approval policy stores what the
// harness's ApprovalService.setPolicy writes for the same switch
// (policynotice.mjs): its approval/policy event, and, as the stored
// next-step input, the message it injects (all but its random id); a
// switch to the policy in effect writes nothing in either.
func TestPolicyNoticeMatchesTheHarness(t *testing.T) {
	type sw struct{ Previous, Policy string }
	switches := []sw{{"ask", "never"}, {"never", "ask"}, {"ask", "ask"}}
	var in strings.Builder
	for _, s := range switches {
		b, _ := json.Marshal(map[string]string{"previous": s.Previous, "policy": s.Policy})
		in.Write(b)
		in.WriteByte('\n')
	}
	var out []json.RawMessage
	runLines(t, "policynotice.mjs", in.String(), &out)
	if len(out) != len(switches) {
		t.Fatalf("policynotice.mjs answered %d switches, want %d", len(out), len(switches))
	}
	for i, s := range switches {
		var h struct {
			Appended []struct {
				Type string          `json:"type"`
				Data json.RawMessage `json:"data"`
			} `json:"appended"`
			Injected []map[string]any `json:"injected"`
			Error    string           `json:"error"`
		}
		if err := json.Unmarshal(out[i], &h); err != nil || h.Error != "" {
			t.Fatalf("%+v: policynotice.mjs: %v %s", s, err, h.Error)
		}

		id := "pn-" + s.Previous + "-" + s.Policy
		hs := sessiontest.NewHarness(t).WithID(id)
		opts := sessiontest.Route()
		opts.ApprovalPolicy = s.Previous
		ready := hs.UpdateAt(time.Second, "", wire.UpdateWaitReady)
		set := hs.UpdateAt(2*time.Second, "", wire.UpdateSetPermissions, wire.SetPermissionsRequest{ApprovalPolicy: s.Policy})
		disp := hs.UpdateAt(10*time.Second, "", wire.UpdateDispose)
		hs.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: id, AgentOptions: opts})
		if err := hs.Env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		ready.OK(t)
		set.OK(t)
		disp.OK(t)
		evs := sessiontest.WithoutRecords(t, sessiontest.Stored(t, hs.Store, id))
		// The facts the create pinned come first; then the switch's.
		var after []int
		for j, e := range evs {
			if e.Type == wire.TypeApprovalPolicy {
				after = append(after, j)
			}
		}
		if len(h.Appended) == 0 {
			if len(after) != 1 || after[0] != len(evs)-1 {
				t.Errorf("%+v: the harness writes nothing; sessionflow stored %v", s, sessiontest.Types(evs))
			}
			continue
		}
		if len(after) != 2 || len(h.Appended) != 1 || h.Appended[0].Type != wire.TypeApprovalPolicy {
			t.Fatalf("%+v: harness appended %+v; sessionflow stored %v", s, h.Appended, sessiontest.Types(evs))
		}
		p := evs[after[1]]
		if !jsonEqual(t, p.Data, h.Appended[0].Data) {
			t.Errorf("%+v: approval/policy %s, harness %s", s, p.Data, h.Appended[0].Data)
		}
		if after[1]+1 >= len(evs) || evs[after[1]+1].Type != wire.TypeInboxSpliced {
			t.Fatalf("%+v: no notice after the policy: %v", s, sessiontest.Types(evs))
		}
		var splice struct {
			Target   string           `json:"target"`
			Inserted []map[string]any `json:"inserted"`
		}
		if err := json.Unmarshal(evs[after[1]+1].Data, &splice); err != nil {
			t.Fatal(err)
		}
		if splice.Target != "next-step" || len(splice.Inserted) != 1 || len(h.Injected) != 1 {
			t.Fatalf("%+v: splice %+v, harness injected %d", s, splice, len(h.Injected))
		}
		got, want := splice.Inserted[0], h.Injected[0]
		if _, ok := got["id"].(string); !ok {
			t.Errorf("%+v: the notice has no id: %v", s, got)
		}
		delete(got, "id")
		delete(want, "id")
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%+v: notice %v, harness %v", s, got, want)
		}
	}
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
