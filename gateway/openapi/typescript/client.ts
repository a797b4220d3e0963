// A web client of bidgate, typed from the OpenAPI documents: make
// lint-typescript generates generated/*.ts with openapi-typescript and
// compiles this file with tsc --strict, so a change to the documents that
// breaks a client built this way fails CI.
import createClient from "openapi-fetch";
import type { components, paths } from "./generated/public";
import type { paths as adminPaths } from "./generated/admin";

type Auction = components["schemas"]["Auction"];
type Bid = components["schemas"]["Bid"];
type Problem = components["schemas"]["Problem"];

export function bidgate(baseUrl: string, token: string) {
  return createClient<paths>({
    baseUrl,
    headers: { Authorization: `Bearer ${token}` },
  });
}

// The README's worked example: create an auction, bid on it, read it back.
export async function workedExample(baseUrl: string, seller: string, bidder: string): Promise<Auction> {
  const created = await bidgate(baseUrl, seller).POST("/auctions", {
    body: {
      title: "Vintage Leica M3",
      startPrice: "100.00",
      minIncrement: "5.00",
      endTime: new Date(Date.now() + 60_000).toISOString(),
    },
  });
  if (created.error) throw problem(created.error);
  const auction: Auction = created.data;

  const bid = await bidgate(baseUrl, bidder).POST("/auctions/{id}/bids", {
    params: {
      path: { id: auction.id },
      header: { "Idempotency-Key": crypto.randomUUID() },
    },
    body: { amount: "105.00" },
  });
  if (bid.error) throw problem(bid.error);
  const accepted: Bid = bid.data;
  console.log(`bid ${accepted.seq} at ${accepted.amount}, leading: ${accepted.leading}`);

  const read = await createClient<paths>({ baseUrl }).GET("/auctions/{id}", {
    params: { path: { id: auction.id } },
  });
  if (read.error) throw problem(read.error);
  return read.data;
}

// An operator's view: who is in the cluster.
export async function members(adminUrl: string): Promise<string[]> {
  const { data, error } = await createClient<adminPaths>({ baseUrl: adminUrl }).GET("/cluster/members");
  if (error) throw new Error(`cluster members: ${JSON.stringify(error)}`);
  return data.members.map((m) => m.name);
}

function problem(p: Problem): Error {
  return new Error(`${p.status} ${p.code}: ${p.detail ?? p.title}`);
}
