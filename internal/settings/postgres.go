package settings

import "bidgate/persist/pgstore"

// Postgres is where PostgreSQL is and, for a command that keeps a pool,
// the pool's size; for bidgate serve, also where its read replica is.
type Postgres struct {
	pgstore.Config
	Read pgstore.ReadConfig
}

// Register adds --postgres-url and --postgres-conns, and their check.
func (p *Postgres) Register(fs *FlagSet) {
	p.RegisterURL(fs)
	fs.IntVar(&p.MaxConns, "postgres-conns", pgstore.DefaultConfig().MaxConns, "PostgreSQL pool size")
	fs.Check(func() error { return p.Config.Validate() }, map[string]string{"MaxConns": "postgres-conns"})
}

// RegisterURL adds --postgres-url alone, for a command that sizes its own
// pool.
func (p *Postgres) RegisterURL(fs *FlagSet) {
	fs.StringVar(&p.URL, "postgres-url", pgstore.DefaultConfig().URL, "PostgreSQL connection URL")
}

// RegisterRead adds --postgres-read-url and --read-max-lag, and their
// check; the read replica's other settings keep their defaults.
func (p *Postgres) RegisterRead(fs *FlagSet) {
	d := pgstore.DefaultReadConfig()
	p.Read = d
	fs.StringVar(&p.Read.URL, "postgres-read-url", "",
		"connection URL of a PostgreSQL streaming standby of --postgres-url that serves reads (empty: every read on the primary)")
	fs.DurationVar(&p.Read.MaxLag, "read-max-lag", d.MaxLag,
		"past this replication lag of --postgres-read-url, reads go to the primary")
	fs.Check(func() error { return p.Read.Validate() }, map[string]string{"MaxLag": "read-max-lag", "URL": "postgres-read-url"})
}
