package bench

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"bidgate/internal/auth"
)

// Job is one bid request to send at Intended.
type Job struct {
	AuctionID int64
	Key       uuid.UUID
	BidderID  int64
	// Exactly one of Amount (a straight bid) and MaxAmount (a proxy bid),
	// decimals with two places; neither with BuyNow, which buys the
	// auction at its buy-now price (POST /auctions/{id}/buy-now).
	Amount    string
	MaxAmount string
	BuyNow    bool
	// Read sends GET /auctions/{id} instead (no token, no body), with
	// If-None-Match of the last ETag that target gave for the auction
	// when IfNoneMatch is set.
	Read        bool
	IfNoneMatch bool
	Kind        Kind
	Step        int
	Intended    time.Time
	// ShortTimeout, when positive, replaces the normal client timeout for
	// this attempt (a deliberate timeout before a retry).
	ShortTimeout time.Duration
	// RetryAfter, when positive, sends the same key, bidder and terms
	// again this long after this attempt ends.
	RetryAfter time.Duration
}

// LoaderConfig sizes the worker pool.
type LoaderConfig struct {
	Workers int           // requests in flight at most
	Queue   int           // scheduled requests waiting for a worker at most
	Timeout time.Duration // normal client timeout
}

// Loader is an open-loop load generator. Streams schedule jobs at fixed
// intended times whatever the answers do; a bounded pool of workers sends
// them, round-robin over the targets. A job that waits for a worker (or for
// room in the queue) has that wait in its latency, which is measured from
// the intended time: coordinated omission is avoided.
type Loader struct {
	ctx     context.Context
	cfg     LoaderConfig
	targets []Target
	clients []*fasthttp.HostClient
	rec     *Recorder
	tokens  *Tokens // each bidder's Authorization header
	queue   chan Job
	next    atomic.Uint64

	outstanding sync.WaitGroup // jobs submitted or scheduled and not yet recorded
	workers     sync.WaitGroup
	planned     atomic.Int64
	dropped     atomic.Int64 // not sent because ctx ended
	closeOnce   sync.Once

	etagMu sync.Mutex
	etags  map[pollKey][]byte // reads' last ETag per target and auction
}

// NewLoader starts the workers. Close stops them. Each bid carries its
// bidder's bearer token (scope bid) from tokens.
func NewLoader(ctx context.Context, targets []Target, cfg LoaderConfig, rec *Recorder, tokens *Tokens) *Loader {
	if cfg.Workers < 1 {
		cfg.Workers = 1
	}
	if cfg.Queue < 1 {
		cfg.Queue = 1
	}
	l := &Loader{ctx: ctx, cfg: cfg, targets: targets, rec: rec, tokens: tokens, queue: make(chan Job, cfg.Queue),
		etags: map[pollKey][]byte{}}
	for _, t := range targets {
		l.clients = append(l.clients, newHostClient(t, cfg.Workers))
	}
	for range cfg.Workers {
		l.workers.Add(1)
		go l.work()
	}
	return l
}

// newHostClient is a pooled keep-alive client of one node. It never retries
// on its own: a retry is the harness's decision and is recorded.
func newHostClient(t Target, conns int) *fasthttp.HostClient {
	return &fasthttp.HostClient{
		Addr:                      t.Addr,
		Name:                      "bidbench",
		MaxConns:                  conns,
		MaxIdleConnDuration:       10 * time.Second,
		MaxIdemponentCallAttempts: 1,
		RetryIfErr:                func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
		ReadBufferSize:            8192,
	}
}

// Planned is how many jobs the running streams will send in all, plus the
// ones submitted and the retries scheduled so far.
func (l *Loader) Planned() int64 { return l.planned.Load() }

// Submit queues a job; it blocks while the queue is full (the wait counts
// in the job's latency). After ctx ends it drops the job.
func (l *Loader) Submit(j Job) {
	l.planned.Add(1)
	l.submit(j)
}

func (l *Loader) submit(j Job) {
	l.outstanding.Add(1)
	l.enqueue(j)
}

func (l *Loader) enqueue(j Job) {
	if l.ctx.Err() != nil {
		l.dropped.Add(1)
		l.outstanding.Done()
		return
	}
	select {
	case l.queue <- j:
	case <-l.ctx.Done():
		l.dropped.Add(1)
		l.outstanding.Done()
	}
}

// Dropped is how many jobs were not sent because ctx ended.
func (l *Loader) Dropped() int64 { return l.dropped.Load() }

// Wait blocks until every submitted job and every retry they scheduled has
// been answered (or dropped because ctx ended).
func (l *Loader) Wait() { l.outstanding.Wait() }

// Close waits for outstanding jobs, then stops the workers and closes the
// connections.
func (l *Loader) Close() {
	l.closeOnce.Do(func() {
		l.Wait()
		close(l.queue)
		l.workers.Wait()
		for _, c := range l.clients {
			c.CloseIdleConnections()
		}
	})
}

// Stream is a fixed-rate schedule: job i is due at Start + i/Rate. Make
// builds job i (false ends the stream early). A stream that falls behind
// (a full queue) submits its overdue jobs at once, each with its own
// intended time.
type Stream struct {
	Rate  float64
	Count int
	Start time.Time
	Make  func(i int, at time.Time) (Job, bool)
}

// Run paces every stream in its own goroutine and returns when all of them
// have submitted their jobs (not when the answers are in: see Wait).
func (l *Loader) Run(streams ...Stream) {
	var wg sync.WaitGroup
	total := 0
	for _, s := range streams {
		if s.Rate > 0 && s.Count > 0 {
			total += s.Count
		}
	}
	// Room for the retries too (a share of the jobs, sent again): growing
	// the slice in mid-load copies every record under the recorder's lock,
	// and every answer waits for it (a stall of up to a second at a flash
	// sale's 180,000 records, on a machine slow to fault in fresh memory).
	l.rec.reserve(total + total/4)
	for _, s := range streams {
		if s.Rate <= 0 || s.Count <= 0 {
			continue
		}
		l.planned.Add(int64(s.Count))
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.pace(s)
		}()
	}
	wg.Wait()
}

func (l *Loader) pace(s Stream) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for i := range s.Count {
		at := s.Start.Add(time.Duration(float64(i) * float64(time.Second) / s.Rate))
		// Waits this short are not slept (a timer per job costs more than it
		// buys at thousands of jobs a second): the job goes up to 200µs
		// early, and its latency then counts from when it was sent.
		if d := time.Until(at); d > 200*time.Microsecond {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-l.ctx.Done():
				return
			}
		}
		if l.ctx.Err() != nil {
			return
		}
		j, ok := s.Make(i, at)
		if !ok {
			return
		}
		j.Intended = at
		l.submit(j)
	}
}

func (l *Loader) work() {
	defer l.workers.Done()
	w := &worker{req: fasthttp.AcquireRequest(), resp: fasthttp.AcquireResponse()}
	defer fasthttp.ReleaseRequest(w.req)
	defer fasthttp.ReleaseResponse(w.resp)
	for j := range l.queue {
		if l.ctx.Err() == nil {
			l.do(w, j)
		} else {
			l.dropped.Add(1)
		}
		l.outstanding.Done()
	}
}

// worker is what one worker reuses from request to request, so that
// sending a bid allocates next to nothing.
type worker struct {
	req            *fasthttp.Request
	resp           *fasthttp.Response
	uri, body, key []byte
	answer         answerDecoder
}

// idempotencyKey is the request header's name, canonical as sent.
var idempotencyKey = []byte("Idempotency-Key")

func (l *Loader) do(w *worker, j Job) {
	t := int((l.next.Add(1) - 1) % uint64(len(l.clients)))
	if j.Read {
		l.read(w, j, t)
		return
	}
	// The bidder's token is minted on its first bid (before the send time,
	// so that the signature counts in the send lag) and cached after.
	bearer, err := l.tokens.Header(j.BidderID, auth.ScopeBid)
	if err != nil {
		now := time.Now()
		r := j.record(t)
		r.Sent, r.Latency, r.Outcome, r.Err = now, now.Sub(earliest(j.Intended, now)), Transport, "not sent: "+err.Error()
		l.rec.add(r)
		return
	}
	req, resp := w.req, w.resp
	req.Reset()
	resp.Reset()
	w.uri = append(w.uri[:0], l.targets[t].Base...)
	w.uri = append(w.uri, "/auctions/"...)
	w.uri = strconv.AppendInt(w.uri, j.AuctionID, 10)
	if j.BuyNow {
		w.uri = append(w.uri, "/buy-now"...)
	} else {
		w.uri = append(w.uri, "/bids"...)
	}
	req.SetRequestURIBytes(w.uri)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.Header.SetCanonical(authorization, bearer)
	w.key = appendUUID(w.key[:0], j.Key)
	req.Header.SetCanonical(idempotencyKey, w.key)
	w.body = appendBody(w.body[:0], &j)
	req.SetBody(w.body)

	timeout := l.cfg.Timeout
	if j.ShortTimeout > 0 {
		timeout = j.ShortTimeout
	}
	sent := time.Now()
	err = l.clients[t].DoTimeout(req, resp, timeout)
	end := time.Now()

	r := j.record(t)
	r.Sent, r.Latency, r.ShortTimeout = sent, end.Sub(earliest(j.Intended, sent)), j.ShortTimeout > 0
	if err != nil {
		r.Err = err.Error()
		r.Outcome = Transport
		if j.ShortTimeout > 0 && isTimeout(err) {
			r.Outcome = PlannedTimeout
		}
	} else {
		r.Status = resp.StatusCode()
		r.Outcome = classify(r.Status)
		var a bidAnswer
		if w.answer.decode(resp.Body(), &a) == nil {
			r.answered(&a)
		}
	}
	l.rec.add(r)

	if j.RetryAfter > 0 && l.ctx.Err() == nil {
		retry := j
		retry.Kind, retry.ShortTimeout, retry.RetryAfter = KindRetry, 0, 0
		retry.Intended = end.Add(j.RetryAfter)
		l.outstanding.Add(1)
		l.planned.Add(1)
		time.AfterFunc(j.RetryAfter, func() { l.enqueue(retry) })
	}
}

// read sends GET /auctions/{id} to target t and records the answer's
// status; the body is not decoded (a reads run measures the server).
func (l *Loader) read(w *worker, j Job, t int) {
	req, resp := w.req, w.resp
	req.Reset()
	resp.Reset()
	w.uri = append(w.uri[:0], l.targets[t].Base...)
	w.uri = append(w.uri, "/auctions/"...)
	w.uri = strconv.AppendInt(w.uri, j.AuctionID, 10)
	req.SetRequestURIBytes(w.uri)
	req.Header.SetMethod(fasthttp.MethodGet)
	k := pollKey{target: t, auction: j.AuctionID}
	if j.IfNoneMatch {
		l.etagMu.Lock()
		w.key = append(w.key[:0], l.etags[k]...)
		l.etagMu.Unlock()
		if len(w.key) > 0 {
			req.Header.SetBytesV(fasthttp.HeaderIfNoneMatch, w.key)
		}
	}
	sent := time.Now()
	err := l.clients[t].DoTimeout(req, resp, l.cfg.Timeout)
	end := time.Now()

	r := j.record(t)
	r.Sent, r.Latency = sent, end.Sub(earliest(j.Intended, sent))
	if err != nil {
		r.Err, r.Outcome = err.Error(), Transport
		l.rec.add(r)
		return
	}
	r.Status = resp.StatusCode()
	r.Outcome = classifyRead(r.Status)
	if tag := resp.Header.Peek(fasthttp.HeaderETag); j.IfNoneMatch && r.Status == fasthttp.StatusOK && len(tag) > 0 {
		l.etagMu.Lock()
		l.etags[k] = append(l.etags[k][:0], tag...)
		l.etagMu.Unlock()
	}
	l.rec.add(r)
}

// record is the job's record before it is sent to target t.
func (j *Job) record(t int) Record {
	return Record{AuctionID: j.AuctionID, Key: j.Key, BidderID: j.BidderID, Amount: j.Amount, MaxAmount: j.MaxAmount,
		BuyNow: j.BuyNow, Kind: j.Kind, Step: j.Step, Target: t, Intended: j.Intended}
}

// answered copies what the answer said into r (its Status is set): the
// problem's code; a 201's or 200's row and the auction's state after it;
// and, whatever the status, any maximum it showed.
func (r *Record) answered(a *bidAnswer) {
	r.Code, r.ShownMax = a.Code, a.MaxAmount
	if r.Status == fasthttp.StatusCreated || r.Status == fasthttp.StatusOK {
		r.Seq, r.AcceptedAt, r.EndTime = a.Seq, a.AcceptedAt, a.EndTime
		r.RowKind, r.RowAmount, r.Leading, r.CurrentPrice = a.Kind, a.Amount, a.Leading, a.CurrentPrice
	}
}

// appendBody appends the job's JSON body: the bidder (the token's subject
// already; named so a node without authentication takes it too) and the
// bid's terms.
func appendBody(dst []byte, j *Job) []byte {
	dst = append(dst, `{"bidderId":`...)
	dst = strconv.AppendInt(dst, j.BidderID, 10)
	switch {
	case j.BuyNow:
	case j.MaxAmount != "":
		dst = append(dst, `,"maxAmount":"`...)
		dst = append(dst, j.MaxAmount...)
		dst = append(dst, '"')
	default:
		dst = append(dst, `,"amount":"`...)
		dst = append(dst, j.Amount...)
		dst = append(dst, '"')
	}
	return append(dst, '}')
}

// isTimeout reports a client-side timeout, in the request or in dialing a
// new connection for it (a deliberately short timeout hits either).
func isTimeout(err error) bool {
	var ne net.Error
	switch {
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, fasthttp.ErrDialTimeout):
		return true
	case errors.As(err, &ne) && ne.Timeout():
		return true
	}
	// fasthttp wraps dial errors in text.
	return strings.Contains(err.Error(), "timed out") || strings.Contains(err.Error(), "i/o timeout")
}

func classify(status int) Outcome {
	switch {
	case status == fasthttp.StatusCreated:
		return Created
	case status == fasthttp.StatusOK:
		return Replayed
	case status == fasthttp.StatusConflict:
		return Conflict
	case status == fasthttp.StatusTooManyRequests:
		return RateLimited
	case status >= 500:
		return ServerError
	}
	return OtherStatus
}

// classifyRead is classify for a GET: its 200 shares the class "200"
// with a replayed bid, a 304 has its own.
func classifyRead(status int) Outcome {
	if status == fasthttp.StatusNotModified {
		return NotModified
	}
	return classify(status)
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
