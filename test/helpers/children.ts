import type { ChildProcess } from 'node:child_process';
import { after } from 'node:test';

// A test that fails between starting a process and the code that stops it would leave the
// process running, its pipes keeping the test file's own process alive. Every child started
// through `reaped` that is still running when the file's tests have ended is killed then, by its
// pid (its process group's, for a child started as the leader of one).

const running = new Map<ChildProcess, { group: boolean }>();

function killAll(): void {
  for (const [child, { group }] of running) {
    try {
      if (group) process.kill(-(child.pid as number), 'SIGKILL');
      else child.kill('SIGKILL');
    } catch {
      // Gone between the exit and its event.
    }
  }
  running.clear();
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

// Registered while the file loads: a hook of the file's root, after its suites' own.
after(killAll);
process.once('exit', killAll);

/**
 * `child`, killed when the test file ends if it is still running then. `group`: it was spawned
 * `detached` (the leader of a process group), and the whole group is killed.
 */
export function reaped<T extends ChildProcess>(child: T, options: { group?: boolean } = {}): T {
  if (child.pid === undefined) return child;
  const group = options.group ?? false;
  running.set(child, { group });
  child.once('exit', () => {
    // A group may outlive its leader (a shell's commands): kept until none of it is left.
    if (!group || !groupAlive(child.pid as number)) running.delete(child);
  });
  return child;
}
