package workflows

import "go.temporal.io/sdk/workflow"

// Every version gate of the workflows (the rule: doc.go, Versioning). A
// gate is asked of workflow.GetVersion with versions DefaultVersion (the
// command sequence recorded before the change) and 1 (since), and only on
// the path the change affects, so a run that never reaches that path
// records no marker. The ids are recorded in histories: never rename one.
// The histories of both branches are in testsuite/histories (the earlier
// ones under legacy/; see its README); "Recorded in" names the files that
// hold a gate's marker.
const (
	// sessionIdentityChange refuses, before any activity, a session id the
	// store cannot hold and a workflow id other than WorkflowID(sessionID)
	// (checkIdentity). Asked only when the check fails.
	// Recorded in: create-foreign-workflow-id.json.
	sessionIdentityChange = "session-identity-check"

	// seedRulesChange refuses, before any side effect, an inline seed
	// breaking a rule the store applies at append (a payload crash repair
	// cannot read, an event type a reader refuses, a misplaced inherited
	// end-seed marker). Earlier runs failed at the store. Asked only when
	// the seed breaks a rule.
	// Recorded in: seed-refused.json.
	seedRulesChange = "seed-append-rules"

	// setupRulesChange refuses, before the commit hook, setup events
	// breaking a rule the store applies at append. Earlier runs failed when
	// the store refused them at the commit point. Asked only then.
	// Recorded in: setup-events-refused.json.
	setupRulesChange = "setup-append-rules"

	// forfeitDeadOwnerChange lets a resume whose open was refused as owned
	// forfeit the lease of a closed owner (ForfeitDeadOwner, then the open
	// again). Earlier runs returned the refusal. Asked only on that path.
	// Recorded in: resume-forfeit-dead-owner.json.
	forfeitDeadOwnerChange = "resume-forfeit-dead-owner"

	// failAfterRollbackChange made WaitReady return a creation or resume
	// failure only once the rollback is done, in the workflow task that
	// completes the run. Before it, WaitReady answered as soon as the
	// failure was known and the run stayed open while its compensations
	// ran, so a caller retrying at once found the workflow id still taken.
	// Recorded in: setup-failure.json, abort-during-setup.json,
	// owner-unload.json, loop-restore-missing.json, loop-child-aborted.json;
	// before: legacy/.
	failAfterRollbackChange = "fail-after-rollback"

	// wireNamesChange gates the names the workflows send: the signals a
	// session sends its parent loop and a loop sends its children, and the
	// activity types a resume schedules. Earlier runs send the Legacy*
	// names; the receiving side accepts both (sentName).
	// Recorded in: resume-repair.json, loop-deactivation.json,
	// loop-child-live.json; before: legacy/*.before-wire-names.json.
	wireNamesChange = "wire-names"

	// phaseSearchAttributeChange introduced the SessionPhase (SessionId,
	// SessionCwd) search attribute upserts at every phase change, for a
	// session whose options ask for them.
	// Recorded in: create-search-attributes.json; before: every file recorded
	// without the option.
	phaseSearchAttributeChange = "session-phase-search-attribute"

	// groupCommitChange replaced the default coalescing timer of appends by
	// group commit: Temporal fires no timer sooner than about a second
	// after it is started, so a 200 ms window held every append for a
	// second; group commit stores an append as soon as no store is in
	// flight. A request with an explicit window keeps the timer.
	// Recorded in: append-group-commit.json and most live paths; before:
	// legacy/.
	groupCommitChange = "append-group-commit"

	// localAppendChange stores the live phase's appends with a local
	// activity run by the workflow's own worker (D45, D46): the batch is
	// not recorded in history a second time and the store runs without a
	// round trip through the server's task queues.
	// Recorded in: append-local.json, append-activity-option.json; before:
	// legacy/*.before-local-append.json.
	localAppendChange = "append-local-activity"

	// canEventsChange makes a live run continue as new once its history
	// reaches Options.ContinueAsNewEvents (D64); earlier runs continue as
	// new only when the server suggests it. Asked the first time the
	// threshold is reached.
	// Recorded in: continue-as-new-threshold.json; before:
	// legacy/continue-as-new-threshold.before-history-length.json.
	canEventsChange = "continue-as-new-history-length"

	// agentTurnsChange added the agent loop: the first turn (or idle
	// Inject) of a run records its marker.
	// Recorded in: turn-*.json.
	agentTurnsChange = "agent-turns"

	// turnLocalStoresChange stores a turn's own events (the AppendBatch of
	// turn/start, step/start and the claimed inputs, and EndTurn) as local
	// activities when the store activities run on the workflow's own task
	// queue (D43). The first turn of a run records the marker.
	// Recorded in: turn-*.json; before:
	// legacy/turn-*.before-turn-local-stores.json.
	turnLocalStoresChange = "turn-local-stores"

	// closeCallsChange closes the tool calls a step leaves without a result
	// (D40): a max-tokens step's calls (at the turn's end through EndTurn,
	// or before the next step through CloseCalls) and the calls of a step
	// whose tool activity failed (through EndTurn).
	// Recorded in: turn-max-tokens-steer.json; before:
	// legacy/turn-max-tokens-steer.before-close-calls.json.
	closeCallsChange = "close-unresolved-calls"

	// toolCancelChange cancels a cancelled turn's running tool calls
	// instead of letting them run to their end (D71).
	// Recorded in: turn-cancel-tool.json.
	toolCancelChange = "cancel-running-tools"

	// turnReconcileChange adopts a turn's batch stored by an earlier
	// attempt of the workflow task (D77). Its marker is recorded only by a
	// run that adopts one.
	// Recorded in: none (a workflow task retried after its local store ran);
	// workflows/local_rerun_test.go runs its paths.
	turnReconcileChange = "turn-reconcile-held"

	// inputAgainChange answers an input update delivered again (the same
	// message id and message as a pending or recently stored input) without
	// queuing it (D77): earlier runs queued (and stored) it again. Its
	// marker is recorded by the first such update of a run.
	// Recorded in: none; workflows/local_rerun_test.go
	// (TestTurnInputDeliveredAgainIsStoredOnce) runs its path.
	inputAgainChange = "input-delivered-again"

	// compactionChange added compaction (D96): the Compact activities a
	// turn runs after a model result that asks for them, and the Compact
	// update's command events and activities. Its marker is recorded by
	// the first of them in a run.
	// Recorded in: turn-compaction.json.
	compactionChange = "turn-compaction"
)

// gates remembers the gates a run has asked, by change id: a gate asked
// where many commands depend on it is asked of workflow.GetVersion once,
// the first time the run reaches one of them, and its answer kept for the
// rest of the run. Only its method writes it.
type gates map[string]bool

// taken reports whether the run takes the change id (version 1), asking
// workflow.GetVersion the first time.
func (g gates) taken(ctx workflow.Context, id string) bool {
	if t, ok := g[id]; ok {
		return t
	}
	t := workflow.GetVersion(ctx, id, workflow.DefaultVersion, 1) >= 1
	g[id] = t
	return t
}

// approvalsChange gates tool calls by the session's approval policy
// (D103): each RunTool carries the policy and the allow rules, and a call
// that must be approved waits for a Decide. Its marker is recorded by the
// first tool call of a run.
// Recorded in: turn-tools.json, turn-approval.json.
const approvalsChange = "tool-approvals"

// permissionsChange stores the permission facts a create or resume sets
// (permission/preset, sandbox/mode, approval/policy, approval/rules) with
// the setup events (D103). Its marker is recorded only by a run that
// stores some.
// Recorded in: turn-approval.json.
const permissionsChange = "permission-pins"

// approvalParkChange lets a turn whose calls all wait for approvals
// continue as new when its run is due to (D107): the turn is carried in
// LiveState.Parked and the next run runs its step's calls again. Its
// marker is recorded by the first park.
// Recorded in: none (a run's history must reach its threshold while
// approvals wait); workflows/turn_approval_test.go
// (TestApprovalsWaitAcrossContinueAsNew) runs its path.
const approvalParkChange = "approval-park"

// readOnlyPresetChange added the harness's shipped `read-only` preset
// (read-only with approval policy ask) to the table: agentOptions.preset
// and SetPermissions accept it, and a session whose mode and policy are
// its bundle has it as its preset (permission/preset). Earlier runs
// refused the name and called the bundle no preset. Asked only where the
// answer differs: a create or resume naming it, or permissions resolved to
// its bundle.
// Recorded in: none (a create naming the preset); workflows/preset_test.go
// runs its paths.
const readOnlyPresetChange = "read-only-preset"

// loopPermissionsChange gives a SessionLoop's configured agents the
// permission options of agentOptions (sandboxMode, networkAccess,
// approvalPolicy, preset, approvalRules, approvalTimeoutMs), validated at
// loop start and passed to the creates and resumes the loop starts.
// Earlier runs ignored those fields. Asked at loop start only when an
// agent sets one.
// Recorded in: none (a loop whose agents set permissions);
// workflows/loop_permissions_test.go runs its paths.
const loopPermissionsChange = "loop-agent-permissions"

// workerDefaultsChange applies the worker's permission defaults (worker
// --sandbox-mode, --approval-policy, --preset), which the create's
// CreateHandle and the resume's OpenHandle report and history records, to
// a session whose options and log set a knob none: the knob takes the
// default and the create or resume pins it. Earlier runs ignored them.
// Asked only when the defaults change the permissions or the pins.
// Recorded in: none (a worker configured with defaults);
// workflows/worker_defaults_test.go runs its paths.
const workerDefaultsChange = "worker-permission-defaults"

// policyNoticeChange stores, with the approval/policy a SetPermissions
// changes, the harness's notice of the change (ApprovalService.setPolicy):
// an agent/inbox/spliced next-step insertion of a user/message from the
// plugin user-approval, which the next step claims. Earlier runs stored the
// policy only. Asked only when a SetPermissions changes the policy.
// Recorded in: turn-approval.json; before:
// legacy/turn-approval.before-policy-notice.json.
const policyNoticeChange = "approval-policy-notice"

// forkAtTurnChange resolves a fork named by a turn (wire.ForkSeed AtTurn,
// AtLastTurn) with the ResolveFork activity before the handle is created.
// Only such a request reaches it; its marker is recorded by that request's
// run, first in it.
// Recorded in: fork-at-turn.json.
const forkAtTurnChange = "fork-at-turn"

// subagentToolChange runs a call of the subagent tool
// (wire.SubagentToolName) as a one-shot child session (D119): a RunTool
// records and plans the call, a child CreateSession runs the task, and a
// second RunTool stores the child's answer as the call's result. Earlier
// runs ran the call as any tool's. Asked by the first subagent call of a
// run.
// Recorded in: turn-subagent.json (its child: turn-subagent-child.json).
const subagentToolChange = "subagent-tool"

// appendApartChange stores a group-committed batch of several Appends one
// Append at a time when the store refuses the group: the refused Append
// fails with its own refusal and the Appends before it are stored (earlier
// runs failed every pending Append with the group's refusal). Asked only
// when the store refuses a group of more than one Append.
// Recorded in: none (the validator refuses before the store what the
// store would refuse); workflows/live_append_test.go
// (TestAppendRefusedInAGroupFailsAlone) runs its path.
const appendApartChange = "append-apart-on-refusal"

// toolOpensStepChange lets the tool activities of a step open the next
// step: each RunTool is asked (agent.ToolInput.OpenNext) to store, in the
// batch holding the last result the step's calls lack, the step/end of
// the step and the step/start of the next, and the turn goes on with that
// step without storing its opening itself (one store, its fsync and, with
// local stores, its marker fewer per tool round). Earlier runs stored the
// opening in a batch of their own. Asked by the first tool step of a run
// that would go on after its calls (no end reason, no cancel, under the
// step limit) and runs no subagent call.
// Recorded in: turn-tools.json, turn-approval.json, turn-crash.json,
// turn-cancel-tool.json; before: legacy/*.before-tool-opens-step.json.
const toolOpensStepChange = "tool-opens-step"

// atEndAppendChange stores Appends at the end (wire.AppendRequest.AtEnd):
// the session numbers such a batch after the batches accepted before it,
// and a store of a group holding one is a group store
// (activities.AppendBatchInput.Group, jsonl.Handle.AppendGroup) that
// adopts what a workflow task attempt that left no history stored past
// the workflow's cursor and reports the held events no batch claimed,
// which the run keeps ahead (LiveState.AppendsAhead) and answers a later
// AtEnd Append with; an AtEnd Append delivered again under the id of one a
// run answered is answered the same (LiveState.AnsweredAtEnd). Earlier
// builds refused an AtEnd request (an unknown field), so no earlier
// history holds one. Asked by the first AtEnd Append of a run.
// Recorded in: append-at-end.json.
const atEndAppendChange = "append-at-end"

// modelRecordsCallsChange has the model call store the tool/call of each
// call the step starts at once (the first call when it is not
// parallel-safe, else the leading parallel-safe calls up to
// maxParallelToolCalls), in model order, in the batch and the fsync of the
// assistant/message (agent.ModelInput.RecordCalls; the harness appends and
// flushes a call's tool/call as it starts it), unless the message finished
// at its max-tokens limit; each such call's first RunTool is told so
// (agent.ToolInput.Recorded) and its first attempt runs the tool without
// storing the tool/call (one store, its write lock and its fsync fewer per
// recorded call). A recorded call the turn never dispatched is closed with
// the ABORTED_BEFORE_DISPATCH result after its tool/call. Earlier runs had
// each RunTool store its call's tool/call. Asked by the first model call
// of a run.
// Recorded in: every history with a model call; before:
// legacy/*.before-model-records-calls.json.
const modelRecordsCallsChange = "model-records-calls"

// turnAheadChange lets a turn whose opening store finds, where its
// turn/start goes, events an append stored (a workflow task attempt that
// left no history stored a group of Appends there, or its local store
// wrote them late, after the retried attempt went on without them) keep
// them ahead, by seq and print, for the Appends that bring them, and store
// its own events after them (activities.AppendBatchInput.Ahead,
// turnRun.keepAhead). Earlier runs refused them: the turn ended
// store-failed and the session was disposed. Asked only when the opening
// store reports such events, so runs that never meet them record nothing.
// Recorded in: turn-keeps-appends-ahead.json (the events written at the
// cursor through the session's write handle, as such an attempt leaves
// them); workflows/turn_appends_ahead_test.go runs its other paths.
const turnAheadChange = "turn-keeps-appends-ahead"
