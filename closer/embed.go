package closer

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The statements and the script, kept as files so they read (and can be
// run by hand) as SQL and Lua.
var (
	//go:embed sql/close_cold.sql
	closeColdSQL string
	//go:embed sql/due_hot.sql
	dueHotSQL string
	//go:embed sql/settle_hot.sql
	settleHotSQL string
	//go:embed sql/extend_hot.sql
	extendHotSQL string
	//go:embed sql/insert_outbox.sql
	insertOutboxSQL string
	//go:embed sql/pending_outbox.sql
	pendingOutboxSQL string
	//go:embed sql/mark_published.sql
	markPublishedSQL string
	//go:embed sql/outbox_backlog.sql
	outboxBacklogSQL string

	//go:embed lua/close_auction.lua
	closeAuctionLua    string
	closeAuctionScript = redis.NewScript(closeAuctionLua)
)
