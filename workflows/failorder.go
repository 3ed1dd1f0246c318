package workflows

// failAfterRollbackChange names the versioned change that made WaitReady
// return a creation or resume failure only once the rollback is done, in
// the workflow task that completes the run. Before it, WaitReady answered
// as soon as the failure was known and the run stayed open while its
// compensations ran, so a caller retrying at once found the workflow id
// still taken (WorkflowExecutionAlreadyStarted).
const failAfterRollbackChange = "fail-after-rollback"
