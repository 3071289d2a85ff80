package api

// Lifecycle log message types.
const (
	TypeEvents    = "events"     // EventsRequest → EventList
	TypeEventList = "event_list" // daemon → client
)

// EventsRequest asks for the newest Limit events with a sequence number
// above After, of Session only when it is set, oldest first. Limit <= 0
// means all of them (the log is capped, so all is bounded).
//
// A follower asks again with After set to the previous reply's Last: one
// connection, a request per poll.
type EventsRequest struct {
	Session string `json:"session,omitempty"`
	After   uint64 `json:"after,omitempty"`
	Limit   int    `json:"limit,omitempty"`
}

// EventList answers events.
type EventList struct {
	Events []Event `json:"events"`
	// Last is the newest sequence number the log has handed out, whether
	// or not its event matched the request.
	Last uint64 `json:"last"`
}
