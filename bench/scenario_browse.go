package bench

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/valyala/fasthttp"

	"bidgate/internal/auth"
)

// BrowseConfig is the browse scenario: a volume of auctions and bids
// seeded with SQL, then an open-loop mix of the read routes (list, search,
// history, my bids, my auctions) at Rate actions a second.
type BrowseConfig struct {
	Auctions int           `json:"seedAuctions"`
	Bids     int           `json:"seedBids"` // about: the skew draws each auction's count
	Seed     bool          `json:"seed"`     // false: reuse the volume already there
	Sellers  int           `json:"sellers"`
	Bidders  int           `json:"bidders"`
	Rate     float64       `json:"rate"` // actions/s; an action is 1 to Pages requests
	Duration time.Duration `json:"duration"`
	Pages    int           `json:"pages"` // nextCursor followed up to Pages-1 times
	// WithFlashSale runs a small flash sale (FlashHot hot auctions at
	// FlashHotRate bids/s each, FlashColdRate bids/s over FlashCold cold
	// ones) over the same Duration, and audits it.
	WithFlashSale bool    `json:"withFlashSale"`
	FlashCold     int     `json:"flashCold"`
	FlashColdRate float64 `json:"flashColdRate"`
	FlashHot      int     `json:"flashHot"`
	FlashHotRate  float64 `json:"flashHotRate"`
	// Solo, when positive, runs each kind alone for this long after the
	// mix, at the same rate: PostgreSQL's CPU of one kind, which a mix
	// cannot tell apart.
	Solo time.Duration `json:"solo"`
}

// DefaultBrowse is issue 25's volume: 1,000,000 auctions and 10,000,000
// bids, browsed at 200 actions/s for 30 s.
func DefaultBrowse() BrowseConfig {
	return BrowseConfig{Auctions: 1_000_000, Bids: 10_000_000, Seed: true, Sellers: 10_000, Bidders: 100_000,
		Rate: 200, Duration: 30 * time.Second, Pages: 3,
		FlashCold: 1000, FlashColdRate: 20, FlashHot: 2, FlashHotRate: 50}
}

func (c *BrowseConfig) normalize() error {
	switch {
	case c.Auctions < 1 || c.Auctions > 100_000_000:
		return fmt.Errorf("--seed-auctions must be from 1 to 100,000,000")
	case c.Bids < 0 || c.Bids > 1_000_000_000:
		return fmt.Errorf("--seed-bids must be from 0 to 1,000,000,000")
	case c.Sellers < 1 || c.Sellers > browseUsers || c.Bidders < 1 || c.Bidders > browseUsers:
		return fmt.Errorf("--sellers and --bidders must be from 1 to %d", browseUsers)
	case c.Rate <= 0 || c.Rate > 100_000:
		return fmt.Errorf("--rate must be above 0 and at most 100,000")
	case c.Duration < 500*time.Millisecond:
		return fmt.Errorf("--duration must be at least 500ms")
	case c.Pages < 1 || c.Pages > 20:
		return fmt.Errorf("--pages must be from 1 to 20")
	case c.Rate*c.Duration.Seconds() < 1:
		return fmt.Errorf("--rate × --duration sends no request")
	case c.Solo < 0 || (c.Solo > 0 && c.Rate*c.Solo.Seconds() < 1):
		return fmt.Errorf("--solo must be 0 (none) or long enough for a request at --rate")
	case c.WithFlashSale && (c.FlashCold < 0 || c.FlashHot < 0 || c.FlashCold+c.FlashHot == 0 || c.FlashColdRate < 0 || c.FlashHotRate < 0):
		return fmt.Errorf("--with-flash-sale needs auctions (--flash-cold, --flash-hot) and rates that are not negative")
	case c.WithFlashSale && c.Duration < 2*time.Second:
		return fmt.Errorf("--with-flash-sale needs a --duration of at least 2s")
	}
	return nil
}

// soloOf is the config of a kind's run alone.
func (c BrowseConfig) soloOf() *BrowseConfig {
	c.Duration = c.Solo
	return &c
}

// flashSale is the flash sale run beside the browse load: the design's
// mix, scaled down to the browse run's flags.
func (c BrowseConfig) flashSale() FlashSaleConfig {
	f := DefaultFlashSale()
	f.Cold, f.ColdRate, f.Hot, f.HotRate, f.Duration = c.FlashCold, c.FlashColdRate, c.FlashHot, c.FlashHotRate, c.Duration
	f.Warmup = 0 // the browse load starts with it
	// Bidders for 0.5 bids/s each: tokens for the design's 20,000 would
	// take longer to mint than a short run lasts.
	total := float64(c.FlashHot)*c.FlashHotRate + c.FlashColdRate
	f.Create, f.BuyNows, f.Bidders = "sql", min(f.BuyNows, c.FlashCold), max(100, int(math.Ceil(2*total)))
	return f
}

// The browse users' ids are above every other scenario's (sellers 1 ..
// 1000, bidders below 10^11: bidderBase), so that the volume is found again
// by its sellers and no other run's bids show up in its users' lists.
const (
	browseSellerBase = 200_000_000_000
	browseBidderBase = 300_000_000_000
	browseUsers      = 100_000_000
	browseSample     = 10_000 // auctions with bids whose history is read
)

// The query kinds of a browse run, in report order.
const (
	BrowseList        = "list"
	BrowseSearch      = "search"
	BrowseHistory     = "history"
	BrowseMyBids      = "my-bids"
	BrowseMyAuctions  = "my-auctions"
	browseKindsNumber = 5
)

var browseKinds = [browseKindsNumber]string{BrowseList, BrowseSearch, BrowseHistory, BrowseMyBids, BrowseMyAuctions}

// browseShares is each kind's share of the actions, in browseKinds order.
var browseShares = [browseKindsNumber]float64{0.30, 0.25, 0.20, 0.15, 0.10}

// browseWords make the titles; a search asks for one or two of them, so
// each word matches about 3 % of the titles.
var browseWords = []string{
	"vintage", "leica", "camera", "lens", "nikon", "canon", "watch", "omega", "rolex", "seiko",
	"guitar", "fender", "gibson", "piano", "violin", "record", "vinyl", "jazz", "blues", "poster",
	"painting", "print", "bronze", "silver", "gold", "ring", "necklace", "coin", "stamp", "book",
	"atlas", "map", "chair", "table", "lamp", "mirror", "clock", "radio", "bicycle", "helmet",
	"sneaker", "jacket", "scarf", "teapot", "vase", "porcelain", "jade", "lacquer", "silk", "kimono",
	"sword", "knife", "pen", "typewriter", "console", "cartridge", "comic", "card", "figure", "model",
	"train", "car", "motorcycle", "drone", "telescope", "microscope", "compass", "globe", "rug", "quilt",
	"basket", "hat", "boots", "bag", "wallet", "perfume", "whisky", "wine", "cigar", "chess",
	"mask", "drum", "flute", "trumpet", "saxophone", "amplifier", "speaker", "turntable", "projector", "film",
	"postcard", "letter", "medal", "badge", "uniform", "tapestry", "statue", "icon", "manuscript", "fossil",
}

var (
	//go:embed sql/browse_auctions.sql
	browseAuctionsSQL string
	//go:embed sql/browse_bids.sql
	browseBidsSQL string
	//go:embed sql/browse_aliases.sql
	browseAliasesSQL string
	//go:embed sql/browse_volume.sql
	browseVolumeSQL string
	//go:embed sql/browse_sample.sql
	browseSampleSQL string
)

// Browse is what the browse scenario measured.
type Browse struct {
	Auctions     int64   `json:"auctions"` // the volume browsed
	Bids         int64   `json:"bids"`
	FirstAuction int64   `json:"firstAuctionId"`
	LastAuction  int64   `json:"lastAuctionId"`
	Seeded       bool    `json:"seeded"` // false: the volume was there
	SeedSeconds  float64 `json:"seedSeconds"`
	Offered      float64 `json:"offeredActionsPerSecond"`
	Actions      int     `json:"actions"`
	Requests     int64   `json:"requests"`
	// NotOK counts answers other than 200 and transport errors.
	NotOK int64        `json:"notOk"`
	Kinds []BrowseKind `json:"kinds"`
	// PostgreSQL's CPU over the load: every process whose command is
	// postgres, from /proc/<pid>/stat (Linux), the whole server's work
	// whoever asked for it; per request as µs. PGMissing says why it is
	// not known; PGExited counts processes gone during the run (their CPU
	// since the start is lost).
	PGCPUSeconds float64 `json:"postgresCpuSeconds"`
	PGUsPerQuery float64 `json:"postgresUsPerRequest"`
	PGProcesses  int     `json:"postgresProcesses"`
	PGExited     int     `json:"postgresExited"`
	PGMissing    string  `json:"postgresMissing,omitempty"`
	WallSeconds  float64 `json:"wallSeconds"`
	// Solo is each kind run alone after the mix (--solo), in report order.
	Solo []BrowseSolo `json:"solo,omitempty"`
	// FlashSale is the flash sale run beside the load (--with-flash-sale).
	FlashSale *Result `json:"flashSale,omitempty"`
	// HarnessError is the first reason bidbench could not send an action
	// (counted as status "harness").
	HarnessError string `json:"harnessError,omitempty"`
}

// BrowseKind is one query kind's requests (every page counts).
type BrowseKind struct {
	Kind     string           `json:"kind"`
	Actions  int              `json:"actions"`
	Requests int64            `json:"requests"`
	Items    int64            `json:"items"` // items in the 200 answers
	Status   map[string]int64 `json:"status"`
	Latency  Latency          `json:"latency"`
}

// BrowseSolo is one kind run alone: its requests and PostgreSQL's CPU
// over them.
type BrowseSolo struct {
	BrowseKind
	PGCPUSeconds float64 `json:"postgresCpuSeconds"`
	PGUsPerQuery float64 `json:"postgresUsPerRequest"`
	PGMissing    string  `json:"postgresMissing,omitempty"`
}

// BrowseRun seeds (or finds) the volume and runs the mix.
func (e *Env) BrowseRun(ctx context.Context, c BrowseConfig) (*Result, error) {
	if err := c.normalize(); err != nil {
		return nil, err
	}
	res := e.newResult("browse", settingsOf(c))
	b := &Browse{Offered: c.Rate}
	res.Browse = b
	if err := e.browseVolume(ctx, c, b); err != nil {
		return nil, err
	}
	sample, err := e.browseSample(ctx, b)
	if err != nil {
		return nil, err
	}
	e.notef("browse: %d auctions (ids %d..%d), %d bids; %.0f actions/s for %s", b.Auctions, b.FirstAuction, b.LastAuction,
		b.Bids, c.Rate, c.Duration)
	start := time.Now().Add(100 * time.Millisecond)
	var sale chan flashOutcome
	if c.WithFlashSale {
		start, sale = e.besideFlashSale(ctx, c)
	}
	res.LoadStart = start
	e.browseLoad(ctx, c, b, sample, start, -1)
	if sale != nil {
		o := <-sale
		if o.err != nil {
			return res, fmt.Errorf("the flash sale beside the browse load: %w", o.err)
		}
		b.FlashSale = o.res
		res.Checks = append(res.Checks, o.res.Checks...)
		res.note(fmt.Sprintf("a flash sale ran beside the load (its PostgreSQL work is in the CPU above): %d bids sent, %d accepted, %d 5xx or transport errors, p99 %.1f ms; its audit's checks are this run's",
			o.res.Latency.Requests, o.res.Latency.Count(Created), o.res.Latency.Errors(), o.res.Latency.All.P99))
	}
	for _, k := range b.Kinds {
		if bad := k.Requests - k.Status["200"]; bad > 0 {
			res.note(fmt.Sprintf("%s: %d of %d requests were not answered 200: %s", k.Kind, bad, k.Requests, statusCounts(k.Status)))
		}
	}
	for k := range browseKinds {
		if c.Solo <= 0 || ctx.Err() != nil {
			break
		}
		one := *c.soloOf()
		var alone Browse
		e.browseLoad(ctx, one, &alone, sample, time.Now().Add(100*time.Millisecond), k)
		b.Solo = append(b.Solo, BrowseSolo{BrowseKind: alone.Kinds[k], PGCPUSeconds: alone.PGCPUSeconds,
			PGUsPerQuery: alone.PGUsPerQuery, PGMissing: alone.PGMissing})
		e.notef("browse: %s alone: %d requests, p99 %.1f ms, PostgreSQL %.0f µs per request", browseKinds[k],
			alone.Kinds[k].Requests, alone.Kinds[k].Latency.P99, alone.PGUsPerQuery)
	}
	if planned := int(c.Rate * c.Duration.Seconds()); b.Actions < planned && ctx.Err() == nil {
		res.note(fmt.Sprintf("%d of %d planned actions were not sent: the load hit its time bound", planned-b.Actions, planned))
	}
	if b.HarnessError != "" {
		res.note("bidbench could not send every action: " + b.HarnessError)
	}
	if b.PGMissing != "" {
		res.note("PostgreSQL CPU missing: " + b.PGMissing)
	}
	if b.PGExited > 0 {
		res.note(fmt.Sprintf("%d postgres processes exited during the load: their CPU is not counted", b.PGExited))
	}
	res.Finished = time.Now()
	return res, ctx.Err()
}

// browseVolume seeds the auctions and their bids (one statement each), or
// finds the volume of an earlier run when seeding is off.
func (e *Env) browseVolume(ctx context.Context, c BrowseConfig, b *Browse) error {
	if !c.Seed {
		err := e.db.QueryRow(ctx, browseVolumeSQL, int64(browseSellerBase), c.Sellers).
			Scan(&b.FirstAuction, &b.LastAuction, &b.Auctions, &b.Bids)
		if err != nil {
			return fmt.Errorf("find the browse volume: %w", err)
		}
		if b.Auctions == 0 {
			return fmt.Errorf("--seed=false: the database holds no browse volume (sellers %d+); seed one first", browseSellerBase+1)
		}
		return nil
	}
	// Each auction's count is floor(scale × u⁶), u uniform: mean
	// about scale/7 - 1/2.
	scale := 7 * (float64(c.Bids)/float64(c.Auctions) + 0.5)
	if c.Bids == 0 {
		scale = 0
	}
	start := time.Now()
	e.notef("browse: seeding %d auctions and about %d bids with SQL", c.Auctions, c.Bids)
	err := e.db.QueryRow(ctx, browseAuctionsSQL, c.Auctions, int64(browseSellerBase), c.Sellers, int64(browseBidderBase),
		c.Bidders, browseWords, scale).Scan(&b.FirstAuction, &b.LastAuction, &b.Auctions, &b.Bids)
	if err != nil {
		return fmt.Errorf("seed %d browse auctions: %w", c.Auctions, err)
	}
	tag, err := e.db.Exec(ctx, browseBidsSQL, b.FirstAuction, b.LastAuction, int64(browseBidderBase), c.Bidders)
	if err != nil {
		return fmt.Errorf("seed the bids of browse auctions %d..%d: %w", b.FirstAuction, b.LastAuction, err)
	}
	if tag.RowsAffected() != b.Bids {
		return fmt.Errorf("seeded %d bid rows, the auctions count %d", tag.RowsAffected(), b.Bids)
	}
	if _, err := e.db.Exec(ctx, browseAliasesSQL, b.FirstAuction, b.LastAuction); err != nil {
		return fmt.Errorf("seed the bidder aliases of browse auctions %d..%d: %w", b.FirstAuction, b.LastAuction, err)
	}
	// The planner sees the new volume before the load, not when autovacuum
	// gets to it.
	if _, err := e.db.Exec(ctx, "ANALYZE auction, bid, bidder_alias"); err != nil {
		return fmt.Errorf("analyze after seeding: %w", err)
	}
	b.Seeded, b.SeedSeconds = true, time.Since(start).Seconds()
	return nil
}

// flashOutcome is the flash sale's result.
type flashOutcome struct {
	res *Result
	err error
}

// besideFlashSale starts the flash sale and answers when its load starts
// (the browse load starts then too) and where its result will come.
func (e *Env) besideFlashSale(ctx context.Context, c BrowseConfig) (time.Time, chan flashOutcome) {
	sale, started := make(chan flashOutcome, 1), make(chan time.Time, 1)
	go func() {
		res, err := e.flashSale(ctx, c.flashSale(), func(t0 time.Time) { started <- t0 })
		if err == nil && res == nil {
			err = fmt.Errorf("no result")
		}
		sale <- flashOutcome{res, err}
	}()
	select {
	case t0 := <-started:
		return t0, sale
	case o := <-sale: // it failed before its load: the browse load runs alone and reports that
		sale <- o
		return time.Now().Add(100 * time.Millisecond), sale
	}
}

// browseSample is some auctions with bids, for the history queries.
func (e *Env) browseSample(ctx context.Context, b *Browse) ([]int64, error) {
	rows, err := e.db.Query(ctx, browseSampleSQL, b.FirstAuction, b.LastAuction, browseSample)
	if err != nil {
		return nil, fmt.Errorf("sample browse auctions with bids: %w", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("sample browse auctions with bids: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sample browse auctions with bids: %w", err)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("browse auctions %d..%d have no bids to read a history of", b.FirstAuction, b.LastAuction)
	}
	return ids, nil
}

// browseTally gathers one kind's answers from the workers.
type browseTally struct {
	mu       sync.Mutex
	actions  int
	requests int64
	items    int64
	status   map[string]int64
	hist     *hdrhistogram.Histogram
}

func (t *browseTally) add(status string, items int, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.requests++
	t.items += int64(items)
	t.status[status]++
	recordLatency(t.hist, d)
}

// browseLoad sends the actions at their intended times, at most
// Loader.Workers at once; an action's first request is timed from its
// intended time (a wait for a worker counts), a further page from its send.
// only, from 0, sends that kind alone; -1 the mix.
func (e *Env) browseLoad(ctx context.Context, c BrowseConfig, b *Browse, sample []int64, start time.Time, only int) {
	var tallies [browseKindsNumber]*browseTally
	for i := range tallies {
		tallies[i] = &browseTally{status: map[string]int64{}, hist: newHist(3)}
	}
	clients := make([]*fasthttp.HostClient, len(e.targets))
	for i, t := range e.targets {
		clients[i] = newHostClient(t, e.opt.Loader.Workers)
	}
	count := int(c.Rate * c.Duration.Seconds())
	lctx, cancel := context.WithTimeout(ctx, c.Duration+time.Duration(c.Pages)*e.opt.Loader.Timeout+10*time.Second)
	defer cancel()
	rng := e.rng()
	slots := make(chan struct{}, max(1, e.opt.Loader.Workers))
	var wg sync.WaitGroup
	_ = sleepUntil(ctx, start.Add(-10*time.Millisecond))
	pg0, pgErr0 := postgresCPU()
	t0 := time.Now()
	for i := 0; i < count && lctx.Err() == nil; i++ {
		intended := start.Add(time.Duration(float64(i) / c.Rate * float64(time.Second)))
		if sleepUntil(lctx, intended) != nil {
			break
		}
		k := pickBrowseKind(rng.Float64())
		if only >= 0 {
			k = only
		}
		a := browseAction{kind: k, client: clients[i%len(clients)], tally: tallies[k], intended: intended,
			pages: 1 + rng.IntN(c.Pages), timeout: e.opt.Loader.Timeout}
		if err := e.planBrowse(&a, rng, c, sample); err != nil {
			tallies[k].add("harness", 0, 0)
			b.HarnessError = cmp.Or(b.HarnessError, err.Error())
			continue
		}
		select {
		case slots <- struct{}{}:
		case <-lctx.Done():
		}
		if lctx.Err() != nil {
			break
		}
		tallies[k].mu.Lock()
		tallies[k].actions++
		tallies[k].mu.Unlock()
		b.Actions++
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			a.run(lctx)
		}()
	}
	wg.Wait()
	pg1, pgErr1 := postgresCPU()
	b.WallSeconds = time.Since(t0).Seconds()
	for i, t := range tallies {
		k := BrowseKind{Kind: browseKinds[i], Actions: t.actions, Requests: t.requests, Items: t.items, Status: t.status,
			Latency: latencyOf(t.hist)}
		b.Kinds = append(b.Kinds, k)
		b.Requests += k.Requests
		b.NotOK += k.Requests - k.Status["200"]
	}
	switch {
	case pgErr0 != nil || pgErr1 != nil:
		b.PGMissing = fmt.Sprint(cmpErr(pgErr0, pgErr1))
	default:
		b.PGCPUSeconds, b.PGProcesses, b.PGExited = pgCPUBetween(pg0, pg1)
		if b.Requests > 0 {
			b.PGUsPerQuery = b.PGCPUSeconds * 1e6 / float64(b.Requests)
		}
	}
}

// cmpErr is the first non-nil error.
func cmpErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// pickBrowseKind maps a uniform u in [0, 1) to a kind by browseShares.
func pickBrowseKind(u float64) int {
	for i, s := range browseShares {
		if u < s {
			return i
		}
		u -= s
	}
	return browseKindsNumber - 1
}

// browseAction is one user's visit: a first page, then up to pages-1 more
// along nextCursor.
type browseAction struct {
	kind     int
	client   *fasthttp.HostClient
	tally    *browseTally
	intended time.Time
	pages    int
	timeout  time.Duration
	path     string // with its query, without a cursor
	bearer   []byte // nil: public
}

// planBrowse picks the action's query: random sorts and filters for the
// list, one or two title words for a search, a sampled auction's history,
// a random bidder's or seller's own list.
func (e *Env) planBrowse(a *browseAction, rng *rand.Rand, c BrowseConfig, sample []int64) error {
	q := url.Values{}
	q.Set("limit", strconv.Itoa([]int{10, 20, 50}[rng.IntN(3)]))
	sorts := []string{"ending", "newest", "price_desc"}
	var err error
	switch browseKinds[a.kind] {
	case BrowseList:
		q.Set("sort", sorts[rng.IntN(3)])
		if rng.IntN(10) < 3 {
			q.Set("status", "CLOSED")
		}
		if rng.IntN(10) == 0 {
			q.Set("hot", "false")
		}
		if q.Get("status") == "" && rng.IntN(5) == 0 {
			q.Set("endingBefore", formatEnd(time.Now().Add(time.Duration(1+rng.IntN(7))*24*time.Hour)))
		}
		a.path = "/auctions?"
	case BrowseSearch:
		words := browseWords[rng.IntN(len(browseWords))]
		if rng.IntN(2) == 0 {
			words += " " + browseWords[rng.IntN(len(browseWords))]
		}
		q.Set("q", words)
		q.Set("sort", sorts[rng.IntN(3)])
		if rng.IntN(5) == 0 {
			q.Set("status", "CLOSED")
		}
		a.path = "/auctions?"
	case BrowseHistory:
		a.path = "/auctions/" + strconv.FormatInt(sample[rng.IntN(len(sample))], 10) + "/bids?"
	case BrowseMyBids:
		if rng.IntN(5) == 0 {
			q.Set("state", []string{"leading", "outbid", "won", "lost"}[rng.IntN(4)])
		}
		a.path = "/me/bids?"
		a.bearer, err = e.tokens.Header(browseBidderBase+1+int64(rng.IntN(c.Bidders)), auth.ScopeBid)
	case BrowseMyAuctions:
		a.path = "/me/auctions?"
		a.bearer, err = e.tokens.Header(browseSellerBase+1+int64(rng.IntN(c.Sellers)), auth.ScopeSell)
	}
	a.path += q.Encode()
	return err
}

// browsePage is the part of a list answer the load reads.
type browsePage struct {
	Items      []json.RawMessage `json:"items"`
	NextCursor *string           `json:"nextCursor"`
}

// run sends the action's pages in turn and tallies each.
func (a *browseAction) run(ctx context.Context) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	from, cursor := a.intended, ""
	for page := 0; page < a.pages && ctx.Err() == nil; page++ {
		req.Reset()
		resp.Reset()
		uri := a.path
		if cursor != "" {
			uri += "&cursor=" + url.QueryEscape(cursor)
		}
		req.SetRequestURI(uri)
		req.Header.SetHost(a.client.Addr)
		if a.bearer != nil {
			req.Header.SetBytesV("Authorization", a.bearer)
		}
		err := a.client.DoTimeout(req, resp, a.timeout)
		took := time.Since(from)
		if err != nil {
			a.tally.add("transport", 0, took)
			return
		}
		var p browsePage
		status := strconv.Itoa(resp.StatusCode())
		if resp.StatusCode() != fasthttp.StatusOK || json.Unmarshal(resp.Body(), &p) != nil {
			if status == "200" {
				status = "200 unreadable"
			}
			a.tally.add(status, 0, took)
			return
		}
		a.tally.add(status, len(p.Items), took)
		if p.NextCursor == nil {
			return
		}
		cursor, from = *p.NextCursor, time.Now()
	}
}
