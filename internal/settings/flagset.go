// Package settings is the command line of bidgate's commands (bidgate
// serve, dev, migrate, broker, token, and bidbench): a flag set that also
// reads every flag from the environment, and the groups of settings that
// several commands share (PostgreSQL, Redis, Kafka, logging, token
// signing), each registering its flags with the defaults of the package
// that owns them and checking itself.
//
// A command builds a FlagSet, registers its groups and its own flags,
// and calls Parse, which reads the command line, then the environment,
// then runs every group's check:
//
//	fs := settings.NewFlagSet("bidgate migrate")
//	c.Log.Register(fs)
//	c.Postgres.Register(fs)
//	err := fs.Parse(args)
package settings

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// EnvPrefix starts the environment variable of every flag: --some-name can
// also be set as BIDGATE_SOME_NAME.
const EnvPrefix = "BIDGATE_"

// EnvName is the environment variable of the flag name: BIDGATE_SOME_NAME
// for some-name.
func EnvName(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// FlagSet is the flags of one command. Its flags are defined with the
// methods of flag.FlagSet; Parse also reads them from the environment and
// runs the checks the groups added.
type FlagSet struct {
	*flag.FlagSet
	checks []func() error
}

// NewFlagSet returns the flags of command, named as typed ("bidgate
// serve"). Its usage message lists them and says how to set them from the
// environment.
func NewFlagSet(command string) *FlagSet {
	fs := &FlagSet{FlagSet: flag.NewFlagSet(command, flag.ContinueOnError)}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s [flags]\n\nEvery flag can also be set as %s<FLAG_NAME> in the environment; a flag on the command line wins.\n\n",
			command, EnvPrefix)
		fs.PrintDefaults()
	}
	return fs
}

// Check adds a check that Parse runs once every flag has its value, after
// the checks added before it. fields maps the field names validate's
// errors use (a package's Config.Validate names its fields) to the flags
// that set them, so that an error names what to change on the command
// line; nil leaves the errors as they are.
func (fs *FlagSet) Check(validate func() error, fields map[string]string) {
	fs.checks = append(fs.checks, func() error { return asFlags(validate(), fields) })
}

// Parse reads args, then the environment variable of every flag that args
// did not set, then runs the checks. Arguments that are not flags are an
// error. A -h or --help prints the usage and returns flag.ErrHelp.
func (fs *FlagSet) Parse(args []string) error {
	if err := fs.FlagSet.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if err := fs.readEnvironment(); err != nil {
		return err
	}
	for _, check := range fs.checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// readEnvironment sets every flag the command line left alone from its
// environment variable, when that is set (even to the empty string).
func (fs *FlagSet) readEnvironment() error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		env := EnvName(f.Name)
		v, ok := os.LookupEnv(env)
		if !ok || given[f.Name] {
			return
		}
		if err := f.Value.Set(v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", env, v, err))
		}
	})
	return errors.Join(errs...)
}

// asFlags rewrites the field names in err's message as the flags of
// fields: "shard: MaxBatch must be ..." becomes "shard: --hot-batch must
// be ...".
func asFlags(err error, fields map[string]string) error {
	if err == nil || len(fields) == 0 {
		return err
	}
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, regexp.QuoteMeta(name))
	}
	// The longest first, so that a name that ends another is not matched
	// inside it.
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	re := regexp.MustCompile(`\b(?:` + strings.Join(names, "|") + `)\b`)
	return errors.New(re.ReplaceAllStringFunc(err.Error(), func(name string) string { return "--" + fields[name] }))
}
