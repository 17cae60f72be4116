/** Call `fn` on each item, `n` calls at a time, in order; resolves when all have ended (`fn` handles its own errors). */
export async function eachPooled<T>(items: T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  const lane = async () => {
    while (queue.length) await fn(queue.shift()!);
  };
  await Promise.all(Array.from({ length: Math.min(n, queue.length) }, lane));
}
