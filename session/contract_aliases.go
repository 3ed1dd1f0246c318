package session

import (
	"github.com/sessionflow/sessionflow/wire"
)

// The declarations below moved to package wire, the contract between the
// workflows and their clients (docs/DECISIONS.md D83). These aliases keep
// this package's code and its callers compiling unchanged; unalias.sh
// rewrites their uses to wire's names and deletes this file.

// TurnEndCompleted is wire.TurnEndCompleted.
const TurnEndCompleted = wire.TurnEndCompleted

// TurnEndAborted is wire.TurnEndAborted.
const TurnEndAborted = wire.TurnEndAborted

// TurnEndBlocked is wire.TurnEndBlocked.
const TurnEndBlocked = wire.TurnEndBlocked

// TurnEndError is wire.TurnEndError.
const TurnEndError = wire.TurnEndError

// TurnEndMaxTokens is wire.TurnEndMaxTokens.
const TurnEndMaxTokens = wire.TurnEndMaxTokens

// TurnEndInterrupted is wire.TurnEndInterrupted.
const TurnEndInterrupted = wire.TurnEndInterrupted

// BlockToolCall is wire.BlockToolCall.
const BlockToolCall = wire.BlockToolCall

// BlockToolResult is wire.BlockToolResult.
const BlockToolResult = wire.BlockToolResult

// BlockText is wire.BlockText.
const BlockText = wire.BlockText

// RoleUser is wire.RoleUser.
const RoleUser = wire.RoleUser

// RoleAssistant is wire.RoleAssistant.
const RoleAssistant = wire.RoleAssistant

// SourceKindTool is wire.SourceKindTool.
const SourceKindTool = wire.SourceKindTool

// TurnStart is wire.TurnStart.
type TurnStart = wire.TurnStart

// TurnEndReason is wire.TurnEndReason.
type TurnEndReason = wire.TurnEndReason

// TurnEnd is wire.TurnEnd.
type TurnEnd = wire.TurnEnd

// StepStart is wire.StepStart.
type StepStart = wire.StepStart

// StepEnd is wire.StepEnd.
type StepEnd = wire.StepEnd

// ToolCall is wire.ToolCall.
type ToolCall = wire.ToolCall

// ContentBlock is wire.ContentBlock.
type ContentBlock = wire.ContentBlock

// AssistantMessageBody is wire.AssistantMessageBody.
type AssistantMessageBody = wire.AssistantMessageBody

// AssistantMessage is wire.AssistantMessage.
type AssistantMessage = wire.AssistantMessage

// ToolResultSource is wire.ToolResultSource.
type ToolResultSource = wire.ToolResultSource

// TextContent is wire.TextContent.
type TextContent = wire.TextContent

// ToolResultContent is wire.ToolResultContent.
type ToolResultContent = wire.ToolResultContent

// ToolResultMessage is wire.ToolResultMessage.
type ToolResultMessage = wire.ToolResultMessage

// ToolError is wire.ToolError.
type ToolError = wire.ToolError

// ToolResult is wire.ToolResult.
type ToolResult = wire.ToolResult

// EndSeed is wire.EndSeed.
type EndSeed = wire.EndSeed

// FormatVersion is wire.FormatVersion.
const FormatVersion = wire.FormatVersion

// FormatVersionV0 is wire.FormatVersionV0.
const FormatVersionV0 = wire.FormatVersionV0

// OriginSubagent is wire.OriginSubagent.
const OriginSubagent = wire.OriginSubagent

// Header is wire.Header.
type Header = wire.Header

// ErrEmptyID is wire.ErrEmptyID.
var ErrEmptyID = wire.ErrEmptyID

// ErrInvalidUTF8ID is wire.ErrInvalidUTF8ID.
var ErrInvalidUTF8ID = wire.ErrInvalidUTF8ID

// ErrCreatedAt is wire.ErrCreatedAt.
var ErrCreatedAt = wire.ErrCreatedAt

// ErrSeededWithoutCount is wire.ErrSeededWithoutCount.
var ErrSeededWithoutCount = wire.ErrSeededWithoutCount

// ErrUnseededWithCount is wire.ErrUnseededWithCount.
var ErrUnseededWithCount = wire.ErrUnseededWithCount

// ValidateID is wire.ValidateID.
var ValidateID = wire.ValidateID

// InboxNextTurn is wire.InboxNextTurn.
const InboxNextTurn = wire.InboxNextTurn

// InboxNextStep is wire.InboxNextStep.
const InboxNextStep = wire.InboxNextStep

// TypeTurnStart is wire.TypeTurnStart.
const TypeTurnStart = wire.TypeTurnStart

// TypeTurnEnd is wire.TypeTurnEnd.
const TypeTurnEnd = wire.TypeTurnEnd

// TypeStepStart is wire.TypeStepStart.
const TypeStepStart = wire.TypeStepStart

// TypeStepEnd is wire.TypeStepEnd.
const TypeStepEnd = wire.TypeStepEnd

// TypeUserMessage is wire.TypeUserMessage.
const TypeUserMessage = wire.TypeUserMessage

// TypeSystemMessage is wire.TypeSystemMessage.
const TypeSystemMessage = wire.TypeSystemMessage

// TypeAssistantMessage is wire.TypeAssistantMessage.
const TypeAssistantMessage = wire.TypeAssistantMessage

// TypeAssistantAttempt is wire.TypeAssistantAttempt.
const TypeAssistantAttempt = wire.TypeAssistantAttempt

// TypeToolCall is wire.TypeToolCall.
const TypeToolCall = wire.TypeToolCall

// TypeToolResult is wire.TypeToolResult.
const TypeToolResult = wire.TypeToolResult

// TypeEndSeed is wire.TypeEndSeed.
const TypeEndSeed = wire.TypeEndSeed

// TypeInboxSpliced is wire.TypeInboxSpliced.
const TypeInboxSpliced = wire.TypeInboxSpliced

// TypeRequestHeader is wire.TypeRequestHeader.
const TypeRequestHeader = wire.TypeRequestHeader

// TypeRequestContext is wire.TypeRequestContext.
const TypeRequestContext = wire.TypeRequestContext

// TypeTodoWrite is wire.TypeTodoWrite.
const TypeTodoWrite = wire.TypeTodoWrite

// TypeFeedbackRecord is wire.TypeFeedbackRecord.
const TypeFeedbackRecord = wire.TypeFeedbackRecord

// TypeAssistantChunk is wire.TypeAssistantChunk.
const TypeAssistantChunk = wire.TypeAssistantChunk

// MaxSafeInteger is wire.MaxSafeInteger.
const MaxSafeInteger = wire.MaxSafeInteger

// ErrEventTooLarge is wire.ErrEventTooLarge.
var ErrEventTooLarge = wire.ErrEventTooLarge

// LineError is wire.LineError.
type LineError = wire.LineError

// BatchLimits is wire.BatchLimits.
type BatchLimits = wire.BatchLimits

// Batch is a run of consecutive events of the input (wire.BatchOf).
type Batch = wire.BatchOf[Event]

// BatchReader reads events for an append from JSONL and groups them into
// batches (wire.BatchReaderOf).
type BatchReader = wire.BatchReaderOf[Event]
