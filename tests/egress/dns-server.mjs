// SPDX-License-Identifier: Apache-2.0
// The test resolver as a process of its own, on 127.0.0.1:53 of the proxy
// namespace, for a proxy that uses the system's resolver configuration
// (the one `shinken run --net proxy` starts). lo.test is loopback; every
// other name under .test is the test host 10.77.0.2. Each query is
// appended to the file named by the argument as "NAME TYPE", so a test can
// tell from outside which names left the proxy.
import { startResolver } from './harness.mjs';

await startResolver({ 'lo.test': { A: ['127.0.0.1'], AAAA: ['::1'] } }, 53, process.argv[2]);
console.log('ready');
