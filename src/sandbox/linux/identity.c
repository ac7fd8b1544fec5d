/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's own host identity: a host name (default "shinken") and a
 * machine id (a new random one per run), each overridable. The host's
 * name and /etc/machine-id identify the machine and the user's install
 * across every sandbox; a workload has no need for either. */
#include "sandbox-internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

int shk__sandbox_identity(const shk_sandbox_opts *o, shk__identity *id)
{
  id->hostname = o->hostname ? o->hostname : "shinken";
  snprintf(id->hostname_file, sizeof id->hostname_file, "%s\n", id->hostname);
  if (o->machine_id) {
    snprintf(id->machine_id, sizeof id->machine_id, "%s\n", o->machine_id);
    return 0;
  }
  unsigned char rnd[16];
  for (size_t got = 0; got < sizeof rnd;) {
    ssize_t n = getrandom(rnd + got, sizeof rnd - got, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -errno;
    got += (size_t)n;
  }
  /* A version 4 UUID's bits, as systemd-machine-id-setup makes one. */
  rnd[6] = (unsigned char)((rnd[6] & 0x0f) | 0x40);
  rnd[8] = (unsigned char)((rnd[8] & 0x3f) | 0x80);
  for (size_t i = 0; i < sizeof rnd; i++)
    snprintf(id->machine_id + 2 * i, 3, "%02x", rnd[i]);
  id->machine_id[32] = '\n';
  id->machine_id[33] = '\0';
  return 0;
}
