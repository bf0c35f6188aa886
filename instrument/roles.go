package instrument

// The warp roles of a warp-specialised block and the spans each records
// (format version 3; docs/ROLES.md). A role record is one span of one role
// in one block: when a copy was issued and when it landed, how long a
// consumer waited for its data or its turn, when its product was issued and
// when its wait for it ended, its softmax, its epilogue.

// Role is the warpgroup a role record comes from: its index in the block
// plus one.
type Role uint8

const (
	RoleProducer  Role = 1 // the warpgroup that issues the copies
	RoleConsumer0 Role = 2 // the first consumer warpgroup: rows 0–63 of the q-tile
	RoleConsumer1 Role = 3 // the second: rows 64–127
)

// Event is what a role record's span was.
type Event uint16

const (
	EventCopyQ     Event = 1  // producer: Q_i's copy, from its issue to its landing
	EventCopyK     Event = 2  // producer: K_j's copy, issued to landed
	EventCopyV     Event = 3  // producer: V_j's copy, issued to landed
	EventFreeK     Event = 4  // producer: waiting for K_j's stage to be released
	EventFreeV     Event = 5  // producer: waiting for V_j's stage to be released
	EventWaitQ     Event = 6  // consumer: waiting for Q_i to land
	EventWaitK     Event = 7  // consumer: waiting for K_j to land
	EventWaitV     Event = 8  // consumer: waiting for V_j to land
	EventTurnS     Event = 9  // consumer: waiting for its turn to issue S_j
	EventTurnPV    Event = 10 // consumer: waiting for its turn to issue P_j·V_j
	EventProductS  Event = 11 // consumer: S_j = Q_i K_jᵀ from the start of its issue to the end of the wait for it
	EventSoftmax   Event = 12 // consumer: the online softmax of S_j and O's rescale
	EventProductPV Event = 13 // consumer: O += P_j V_j from the start of its issue to the end of the wait for it
	EventEpilogue  Event = 14 // consumer: O / l and the LSE written out
	// EventClock is consumer 0's anchor of the block's SM clock: t_start
	// holds %globaltimer (ns) and t_end %clock64 (cycles), read back to back,
	// as the kernel writes it; after placement (the worker) both hold the
	// %globaltimer reading. Two in the block's closing group (no kv-tile):
	// the first read at the block's start, the second after its epilogue.
	EventClock Event = 15
)

var (
	roleNames  = map[Role]string{RoleProducer: "producer", RoleConsumer0: "consumer0", RoleConsumer1: "consumer1"}
	eventNames = map[Event]string{EventCopyQ: "copy_q", EventCopyK: "copy_k", EventCopyV: "copy_v", EventFreeK: "free_k", EventFreeV: "free_v",
		EventWaitQ: "wait_q", EventWaitK: "wait_k", EventWaitV: "wait_v", EventTurnS: "turn_s", EventTurnPV: "turn_pv",
		EventProductS: "product_s", EventSoftmax: "softmax", EventProductPV: "product_pv", EventEpilogue: "epilogue", EventClock: "clock"}
)

func (r Role) String() string  { return enumName(roleNames, r) }
func (e Event) String() string { return enumName(eventNames, e) }

// Consumer reports whether r is a consumer warpgroup.
func (r Role) Consumer() bool { return r == RoleConsumer0 || r == RoleConsumer1 }

// HasEvent reports whether role r records event e: the producer its copies
// and its waits for a free stage; a consumer its waits, turns, products,
// softmax and epilogue; consumer 0 alone the clock anchors.
func (r Role) HasEvent(e Event) bool {
	switch {
	case r == RoleProducer:
		return e >= EventCopyQ && e <= EventFreeV
	case r.Consumer():
		return e >= EventWaitQ && e <= EventEpilogue || e == EventClock && r == RoleConsumer0
	}
	return false
}

// PerTile reports whether e is a span of one kv-tile (a copy of K or V, a
// wait for one, a turn, a product, the softmax) rather than of the block's
// closing group (Q's copy and the waits for it, the epilogue, the clock
// anchors), which has no kv-tile.
func (e Event) PerTile() bool {
	switch e {
	case EventCopyQ, EventWaitQ, EventEpilogue, EventClock:
		return false
	}
	return true
}

// RolesVariant reports whether v's traced build records warp roles (a
// warp-specialised rung whose entry has a role table): only its traces may
// carry FlagRoles.
func RolesVariant(v Variant) bool { return rolesVariants[v] }
