package workflows

import (
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// The declarations below moved to package wire, the contract between the
// workflows and their clients (docs/DECISIONS.md D83). These aliases keep
// this package's code and its callers compiling unchanged; unalias.sh
// rewrites their uses to wire's names and deletes this file.

// CreateSessionName is wire.CreateSessionName.
const CreateSessionName = wire.CreateSessionName

// ResumeSessionName is wire.ResumeSessionName.
const ResumeSessionName = wire.ResumeSessionName

// LiveSessionName is wire.LiveSessionName.
const LiveSessionName = wire.LiveSessionName

// SessionLoopName is wire.SessionLoopName.
const SessionLoopName = wire.SessionLoopName

// UpdateWaitReady is wire.UpdateWaitReady.
const UpdateWaitReady = wire.UpdateWaitReady

// UpdateAppend is wire.UpdateAppend.
const UpdateAppend = wire.UpdateAppend

// UpdateDispose is wire.UpdateDispose.
const UpdateDispose = wire.UpdateDispose

// QueryDescribe is wire.QueryDescribe.
const QueryDescribe = wire.QueryDescribe

// SignalAbort is wire.SignalAbort.
const SignalAbort = wire.SignalAbort

// SignalOwnerUnload is wire.SignalOwnerUnload.
const SignalOwnerUnload = wire.SignalOwnerUnload

// SignalSessionReady is wire.SignalSessionReady.
const SignalSessionReady = wire.SignalSessionReady

// UpdateStart is wire.UpdateStart.
const UpdateStart = wire.UpdateStart

// LegacyQueryDescribe is wire.LegacyQueryDescribe.
const LegacyQueryDescribe = wire.LegacyQueryDescribe

// LegacySignalAbort is wire.LegacySignalAbort.
const LegacySignalAbort = wire.LegacySignalAbort

// LegacySignalOwnerUnload is wire.LegacySignalOwnerUnload.
const LegacySignalOwnerUnload = wire.LegacySignalOwnerUnload

// LegacySignalSessionReady is wire.LegacySignalSessionReady.
const LegacySignalSessionReady = wire.LegacySignalSessionReady

// EntrySessionCreated is wire.EntrySessionCreated.
const EntrySessionCreated = wire.EntrySessionCreated

// EntryAgentCreated is wire.EntryAgentCreated.
const EntryAgentCreated = wire.EntryAgentCreated

// EntrySessionStart is wire.EntrySessionStart.
const EntrySessionStart = wire.EntrySessionStart

// SourceStartup is wire.SourceStartup.
const SourceStartup = wire.SourceStartup

// SourceResume is wire.SourceResume.
const SourceResume = wire.SourceResume

// ErrTypeInvalidArgument is wire.ErrTypeInvalidArgument.
const ErrTypeInvalidArgument = wire.ErrTypeInvalidArgument

// ErrTypeTypeError is wire.ErrTypeTypeError.
const ErrTypeTypeError = wire.ErrTypeTypeError

// ErrTypeAbort is wire.ErrTypeAbort.
const ErrTypeAbort = wire.ErrTypeAbort

// ErrTypeOwnerDisposed is wire.ErrTypeOwnerDisposed.
const ErrTypeOwnerDisposed = wire.ErrTypeOwnerDisposed

// ErrTypeLoopInactive is wire.ErrTypeLoopInactive.
const ErrTypeLoopInactive = wire.ErrTypeLoopInactive

// ErrTypeAlreadyExists is wire.ErrTypeAlreadyExists.
const ErrTypeAlreadyExists = wire.ErrTypeAlreadyExists

// ErrTypeAggregate is wire.ErrTypeAggregate.
const ErrTypeAggregate = wire.ErrTypeAggregate

// ErrTypeNotLive is wire.ErrTypeNotLive.
const ErrTypeNotLive = wire.ErrTypeNotLive

// ErrTypeLifecycleDisposed is wire.ErrTypeLifecycleDisposed.
const ErrTypeLifecycleDisposed = wire.ErrTypeLifecycleDisposed

// ErrTypeBatchTooLarge is wire.ErrTypeBatchTooLarge.
const ErrTypeBatchTooLarge = wire.ErrTypeBatchTooLarge

// ErrTypeError is wire.ErrTypeError.
const ErrTypeError = wire.ErrTypeError

// Phase is wire.Phase.
type Phase = wire.Phase

// PhasePreparing is wire.PhasePreparing.
const PhasePreparing = wire.PhasePreparing

// PhaseSetup is wire.PhaseSetup.
const PhaseSetup = wire.PhaseSetup

// PhaseCommitting is wire.PhaseCommitting.
const PhaseCommitting = wire.PhaseCommitting

// PhaseLive is wire.PhaseLive.
const PhaseLive = wire.PhaseLive

// PhaseDisposing is wire.PhaseDisposing.
const PhaseDisposing = wire.PhaseDisposing

// PhaseClosed is wire.PhaseClosed.
const PhaseClosed = wire.PhaseClosed

// SessionMeta is wire.SessionMeta.
type SessionMeta = wire.SessionMeta

// ForkSeed is wire.ForkSeed.
type ForkSeed = wire.ForkSeed

// AgentOptions is wire.AgentOptions.
type AgentOptions = wire.AgentOptions

// Hooks is wire.Hooks.
type Hooks = wire.Hooks

// Options is wire.Options.
type Options = wire.Options

// ResumeSessionRequest is wire.ResumeSessionRequest.
type ResumeSessionRequest = wire.ResumeSessionRequest

// LifecycleEntry is wire.LifecycleEntry.
type LifecycleEntry = wire.LifecycleEntry

// SessionInfo is wire.SessionInfo.
type SessionInfo = wire.SessionInfo

// ErrorInfo is wire.ErrorInfo.
type ErrorInfo = wire.ErrorInfo

// CompensationError is wire.CompensationError.
type CompensationError = wire.CompensationError

// Description is wire.Description.
type Description = wire.Description

// AbortRequest is wire.AbortRequest.
type AbortRequest = wire.AbortRequest

// AppendResult is wire.AppendResult.
type AppendResult = wire.AppendResult

// DisposeResult is wire.DisposeResult.
type DisposeResult = wire.DisposeResult

// SetupInput is wire.SetupInput.
type SetupInput = wire.SetupInput

// PublishInput is wire.PublishInput.
type PublishInput = wire.PublishInput

// DisposeInput is wire.DisposeInput.
type DisposeInput = wire.DisposeInput

// ReadyNotice is wire.ReadyNotice.
type ReadyNotice = wire.ReadyNotice

// DefaultMaxBatchBytes is wire.DefaultMaxBatchBytes.
const DefaultMaxBatchBytes = wire.DefaultMaxBatchBytes

// MaxMaxBatchBytes is wire.MaxMaxBatchBytes.
const MaxMaxBatchBytes = wire.MaxMaxBatchBytes

// UpdateFollowup is wire.UpdateFollowup.
const UpdateFollowup = wire.UpdateFollowup

// UpdateSteer is wire.UpdateSteer.
const UpdateSteer = wire.UpdateSteer

// UpdateInject is wire.UpdateInject.
const UpdateInject = wire.UpdateInject

// UpdateCancel is wire.UpdateCancel.
const UpdateCancel = wire.UpdateCancel

// QueryLoopState is wire.QueryLoopState.
const QueryLoopState = wire.QueryLoopState

// ErrTypeTurnRunning is wire.ErrTypeTurnRunning.
const ErrTypeTurnRunning = wire.ErrTypeTurnRunning

// ErrTypeTurnLeftOpen is wire.ErrTypeTurnLeftOpen.
const ErrTypeTurnLeftOpen = wire.ErrTypeTurnLeftOpen

// ErrTypeInboxFull is wire.ErrTypeInboxFull.
const ErrTypeInboxFull = wire.ErrTypeInboxFull

// TargetNextTurn is wire.TargetNextTurn.
const TargetNextTurn = wire.TargetNextTurn

// TargetNextStep is wire.TargetNextStep.
const TargetNextStep = wire.TargetNextStep

// LoopIdle is wire.LoopIdle.
const LoopIdle = wire.LoopIdle

// LoopRunning is wire.LoopRunning.
const LoopRunning = wire.LoopRunning

// CauseUser is wire.CauseUser.
const CauseUser = wire.CauseUser

// CauseParent is wire.CauseParent.
const CauseParent = wire.CauseParent

// CauseDisposed is wire.CauseDisposed.
const CauseDisposed = wire.CauseDisposed

// InputRequest is wire.InputRequest.
type InputRequest = wire.InputRequest

// InputResult is wire.InputResult.
type InputResult = wire.InputResult

// CancelRequest is wire.CancelRequest.
type CancelRequest = wire.CancelRequest

// CancelResult is wire.CancelResult.
type CancelResult = wire.CancelResult

// PendingInputs is wire.PendingInputs.
type PendingInputs = wire.PendingInputs

// TurnInfo is wire.TurnInfo.
type TurnInfo = wire.TurnInfo

// LoopState is wire.LoopState.
type LoopState = wire.LoopState

// CallPending is wire.CallPending.
const CallPending = wire.CallPending

// CallRunning is wire.CallRunning.
const CallRunning = wire.CallRunning

// CallDone is wire.CallDone.
const CallDone = wire.CallDone

// CallFailed is wire.CallFailed.
const CallFailed = wire.CallFailed

// CallSkipped is wire.CallSkipped.
const CallSkipped = wire.CallSkipped

// CallState is wire.CallState.
type CallState = wire.CallState

// UpdateWaitTurn is wire.UpdateWaitTurn.
const UpdateWaitTurn = wire.UpdateWaitTurn

// ErrTypeNoSuchTurn is wire.ErrTypeNoSuchTurn.
const ErrTypeNoSuchTurn = wire.ErrTypeNoSuchTurn

// ErrTypeTurnWaitMoved is wire.ErrTypeTurnWaitMoved.
const ErrTypeTurnWaitMoved = wire.ErrTypeTurnWaitMoved

// WaitTurnRequest is wire.WaitTurnRequest.
type WaitTurnRequest = wire.WaitTurnRequest

// DefaultMaxSteps is wire.DefaultMaxSteps.
const DefaultMaxSteps = wire.DefaultMaxSteps

// DefaultMaxParallelToolCalls is wire.DefaultMaxParallelToolCalls.
const DefaultMaxParallelToolCalls = wire.DefaultMaxParallelToolCalls

// MaxPendingInputs is wire.MaxPendingInputs.
const MaxPendingInputs = wire.MaxPendingInputs

// MaxPendingInputBytes is wire.MaxPendingInputBytes.
const MaxPendingInputBytes = wire.MaxPendingInputBytes

// MaxMessageIDLength is wire.MaxMessageIDLength.
const MaxMessageIDLength = wire.MaxMessageIDLength

// AgentConfig is wire.AgentConfig.
type AgentConfig = wire.AgentConfig

// AgentIdentity is wire.AgentIdentity.
type AgentIdentity = wire.AgentIdentity

// SessionLoopInput is wire.SessionLoopInput.
type SessionLoopInput = wire.SessionLoopInput

// StartResult is wire.StartResult.
type StartResult = wire.StartResult

// ChildState is wire.ChildState.
type ChildState = wire.ChildState

// ChildStarting is wire.ChildStarting.
const ChildStarting = wire.ChildStarting

// ChildLive is wire.ChildLive.
const ChildLive = wire.ChildLive

// ChildSettled is wire.ChildSettled.
const ChildSettled = wire.ChildSettled

// LoopChild is wire.LoopChild.
type LoopChild = wire.LoopChild

// ConfigStartFailure is wire.ConfigStartFailure.
type ConfigStartFailure = wire.ConfigStartFailure

// LoopDescription is wire.LoopDescription.
type LoopDescription = wire.LoopDescription

// ErrBadWorkflowID is wire.ErrBadWorkflowID.
var ErrBadWorkflowID = wire.ErrBadWorkflowID

// WorkflowID is wire.WorkflowID.
var WorkflowID = wire.WorkflowID

// SessionIDFromWorkflowID is wire.SessionIDFromWorkflowID.
var SessionIDFromWorkflowID = wire.SessionIDFromWorkflowID

// EncodeWorkflowIDPart is wire.EncodeWorkflowIDPart.
var EncodeWorkflowIDPart = wire.EncodeWorkflowIDPart

// DecodeWorkflowIDPart is wire.DecodeWorkflowIDPart.
var DecodeWorkflowIDPart = wire.DecodeWorkflowIDPart

// CreateSessionRequest is the input of CreateSession, its seed decoded
// strictly (wire.CreateSessionRequestOf).
type CreateSessionRequest = wire.CreateSessionRequestOf[session.Event]

// AppendRequest is the input of the Append update, its events decoded
// strictly (wire.AppendRequestOf).
type AppendRequest = wire.AppendRequestOf[session.Event]

// SetupResult is the output of the setup hook (wire.SetupResultOf).
type SetupResult = wire.SetupResultOf[session.Event]

// StartRequest is the input of the loop's Start update
// (wire.StartRequestOf).
type StartRequest = wire.StartRequestOf[session.Event]
