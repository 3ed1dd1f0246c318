package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/wire"
)

// endedTurn is the LoopState once turn 1 ended.
var endedTurn = wire.LoopState{State: "idle", Recent: []wire.TurnInfo{{Turn: 1, StartSeq: 0, EndSeq: 9, Steps: 2, Claimed: []string{"m1"},
	Reason: &wire.TurnEndReason{Kind: "completed"}}}}

// untilDecided waits with the approvals until each has a decision, then
// ends the turn.
func untilDecided(approvals ...wire.PendingApproval) func(int, []wire.DecideRequest) wire.LoopState {
	return func(_ int, decided []wire.DecideRequest) wire.LoopState {
		var left []wire.PendingApproval
		for _, a := range approvals {
			found := false
			for _, d := range decided {
				found = found || d.ID == a.ID
			}
			if !found {
				left = append(left, a)
			}
		}
		if len(left) == 0 {
			return endedTurn
		}
		return waiting(left...)
	}
}

// watch follows turn m1 in ch, for at most 20 seconds: a chat stuck
// at a question fails the test instead of hanging it.
func watch(t *testing.T, ch *chat) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := ch.watch(ctx, "m1")
	require.NoError(t, ctx.Err(), "the chat was still following the turn; it printed:\n%s", ch.w)
	return err
}

// chatOn is a chat on session s1 of f, reading stdin.
func chatOn(f *approvalTemporal, stdin io.Reader) (*chat, *bytes.Buffer) {
	var out bytes.Buffer
	ch := &chat{a: &app{}, c: client.New(f, client.Options{}), id: "s1", w: &out}
	ch.in = newChatInput(stdin, &out)
	return ch, &out
}

// A call waiting for approval is shown with its reason, its arguments
// and the rule [a]lways adds, and asked about; piped input answers it:
// y allows it once.
func TestChatAsksAboutAnApproval(t *testing.T) {
	f := &approvalTemporal{state: untilDecided(goTest), decide: echoDecide}
	ch, out := chatOn(f, strings.NewReader("y\n"))
	require.NoError(t, watch(t, ch))
	require.Equal(t, `⏸ run_command (c1) waits for your approval: run_command requires approval in this session
  command: go test ./...
  [a]lways also allows from now on: run_command: commands starting "go test"
Allow? [y]es / [n]o / [a]lways: y
allowed call c1 (run_command) once
[turn 1 completed]
`, out.String())
	require.Equal(t, []wire.DecideRequest{{ID: "ap-1", CallID: "c1", Outcome: "allowed-once"}}, f.decisions())
}

// Two calls wait: they are asked in turn; an answer that is none is asked
// again; n rejects, a allows and remembers the derived rule; a command
// typed at the question runs and the question comes back.
func TestChatAsksEachApprovalInTurn(t *testing.T) {
	f := &approvalTemporal{state: untilDecided(goTest, writeNotes), decide: echoDecide}
	ch, out := chatOn(f, strings.NewReader("maybe\nn\n/permissions\nA\n"))
	require.NoError(t, watch(t, ch))
	require.Equal(t, `⏸ run_command (c1) waits for your approval: run_command requires approval in this session
  command: go test ./...
  [a]lways also allows from now on: run_command: commands starting "go test"
Allow? [y]es / [n]o / [a]lways: maybe
answer y (run it once), n (reject it) or a (run it, and calls like it from now on)
Allow? [y]es / [n]o / [a]lways: n
rejected call c1 (run_command)
⏸ write_file (c2) waits for your approval: write_file requires approval in this session
  path: docs/notes.md
  content: one
    two
  [a]lways also allows from now on: write_file: paths under docs
Allow? [y]es / [n]o / [a]lways: /permissions
sandbox mode      workspace-write
network           off
approval policy   ask
preset            workspace-write
approval timeout  none (an approval waits until decided)
allow rules       none
Allow? [y]es / [n]o / [a]lways: A
allowed call c2 (write_file); from now on allowed without asking: write_file: paths under docs
[turn 1 completed]
`, out.String())
	require.Equal(t, []wire.DecideRequest{
		{ID: "ap-1", CallID: "c1", Outcome: "rejected"},
		{ID: "ap-2", CallID: "c2", Outcome: "allowed-once", Remember: &wire.ApprovalRule{Tool: "write_file", PathPrefix: "docs"}},
	}, f.decisions())
}

// [a]lways for a call no rule can be derived from is refused, and the
// question asked again; a last line without a newline answers.
func TestChatAlwaysWithoutARule(t *testing.T) {
	sub := wire.PendingApproval{ID: "ap-3", CallID: "c3", Tool: "run_command", Arguments: `{"command":"(cd x; make)"}`}
	f := &approvalTemporal{state: untilDecided(sub), decide: echoDecide}
	ch, out := chatOn(f, strings.NewReader("a\ny"))
	require.NoError(t, watch(t, ch))
	require.Contains(t, out.String(), `  [a]lways cannot apply: no allow rule can be derived from the call: the command "(cd x; make)" does not start with a plain word
Allow? [y]es / [n]o / [a]lways: a
cannot allow calls like it: no allow rule can be derived from the call: the command "(cd x; make)" does not start with a plain word; answer y or n
Allow? [y]es / [n]o / [a]lways: y
allowed call c3 (run_command) once
`)
	require.Equal(t, []wire.DecideRequest{{ID: "ap-3", CallID: "c3", Outcome: "allowed-once"}}, f.decisions())
}

// An approval decided meanwhile (another starter, its timeout) is said
// so and the chat goes on; a question whose call starts elsewhere is
// dropped.
func TestChatApprovalDecidedElsewhere(t *testing.T) {
	f := &approvalTemporal{state: untilDecided(goTest), decide: func(wire.DecideRequest) (wire.DecideResult, error) {
		return wire.DecideResult{}, temporal.NewNonRetryableApplicationError(`Decide: the approval of call "c1" is settled: rejected`, "ApprovalSettled", nil, "rejected")
	}}
	ch, out := chatOn(f, strings.NewReader("y\n"))
	require.NoError(t, watch(t, ch))
	require.Contains(t, out.String(), "Allow? [y]es / [n]o / [a]lways: y\ncall c1 was decided already: rejected\n[turn 1 completed]\n")

	running := waiting()
	running.Calls = []wire.CallState{{ID: "c1", Name: "run_command", State: wire.CallRunning}}
	f = &approvalTemporal{state: func(polls int, _ []wire.DecideRequest) wire.LoopState {
		switch polls {
		case 0:
			return waiting(goTest)
		case 1:
			return running
		}
		return endedTurn
	}}
	stdin, w := io.Pipe()
	defer w.Close()
	ch, out = chatOn(f, stdin)
	require.NoError(t, watch(t, ch))
	require.True(t, strings.HasSuffix(out.String(), "Allow? [y]es / [n]o / [a]lways: \ncall c1 was decided elsewhere\n[turn 1 completed]\n"), out.String())
	require.Empty(t, f.decisions())
}

// The end of piped input while a call waits leaves the chat (disposing
// the session, which settles the call).
func TestChatInputEndsAtAnApproval(t *testing.T) {
	f := &approvalTemporal{state: untilDecided(goTest), decide: echoDecide}
	ch, out := chatOn(f, strings.NewReader(""))
	err := watch(t, ch)
	var leave *leaveRequest
	require.True(t, errors.As(err, &leave), "%v", err)
	require.True(t, leave.dispose)
	require.True(t, strings.HasSuffix(out.String(), "Allow? [y]es / [n]o / [a]lways: \nthe input ended while call c1 waits for approval: leaving\n"), out.String())
	require.Empty(t, f.decisions())
}

// /permissions shows the permissions; ask and never switch the policy
// between turns, and are refused during one without asking the session.
func TestChatPermissionsCommand(t *testing.T) {
	f := &approvalTemporal{state: fixed(wire.LoopState{State: "idle", Permissions: &wire.Permissions{SandboxMode: "workspace-write", ApprovalPolicy: "never"}}),
		perms: wire.Permissions{SandboxMode: "workspace-write", ApprovalPolicy: "never"}}
	ch, out := chatOn(f, strings.NewReader(""))
	ctx := context.Background()
	require.NoError(t, ch.handle(ctx, "/permissions", false))
	require.Contains(t, out.String(), "approval policy   never\n")
	out.Reset()
	require.NoError(t, ch.handle(ctx, "/permissions ask", false))
	require.True(t, strings.HasPrefix(out.String(), "approval policy ask\nsandbox mode      workspace-write\nnetwork           off\napproval policy   ask\n"), out.String())
	require.Equal(t, []wire.SetPermissionsRequest{{ApprovalPolicy: "ask"}}, f.sets)
	out.Reset()
	require.NoError(t, ch.handle(ctx, "/permissions never", true))
	require.Equal(t, "/permissions never runs between turns: type it again when the turn has ended\n", out.String())
	out.Reset()
	require.NoError(t, ch.handle(ctx, "/permissions always", false))
	require.Equal(t, "/permissions takes ask, never, a preset (read-only, workspace-write, danger-full-access) or nothing\n", out.String())
	require.Len(t, f.sets, 1)
	// A preset, as the harness's /permission <preset>.
	out.Reset()
	require.NoError(t, ch.handle(ctx, "/permissions read-only", false))
	require.True(t, strings.HasPrefix(out.String(), "preset read-only\nsandbox mode      read-only\nnetwork           off\napproval policy   ask\npreset            read-only\n"), out.String())
	require.Equal(t, wire.SetPermissionsRequest{Preset: "read-only"}, f.sets[1])
	out.Reset()
	require.NoError(t, ch.handle(ctx, "/permissions danger-full-access", true))
	require.Equal(t, "/permissions danger-full-access runs between turns: type it again when the turn has ended\n", out.String())
	require.Len(t, f.sets, 2)
}
