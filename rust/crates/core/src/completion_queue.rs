//! Finished work waiting for an event loop, and the socket that tells the loop about it.
//!
//! A worker thread (or a tokio task) pushes `(ticket, result)` pairs; an event loop waits until
//! [`CompletionQueue::wakeup_fd`] is readable and takes them all at once. One byte is written
//! when the queue goes from empty to non-empty, so a burst of completions costs one wake-up.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::Mutex;

pub struct CompletionQueue<T> {
    pending: Mutex<Vec<(u64, T)>>,
    wakeup: UnixStream,
    wakeup_reader: UnixStream,
}

impl<T> CompletionQueue<T> {
    pub fn new() -> std::io::Result<Self> {
        let (wakeup_reader, wakeup) = UnixStream::pair()?;
        wakeup_reader.set_nonblocking(true)?;
        wakeup.set_nonblocking(true)?;
        Ok(CompletionQueue {
            pending: Mutex::new(Vec::new()),
            wakeup,
            wakeup_reader,
        })
    }

    /// Add a finished ticket and wake the event loop if it may be asleep.
    pub fn push(&self, ticket: u64, result: T) {
        let was_empty = match self.pending.lock() {
            Ok(mut pending) => {
                pending.push((ticket, result));
                pending.len() == 1
            }
            Err(_) => return,
        };
        if was_empty {
            // A full socket buffer already holds a wake-up: nothing is lost by ignoring it.
            let _ = (&self.wakeup).write(&[1]);
        }
    }

    /// The descriptor that turns readable when completions wait.
    pub fn wakeup_fd(&self) -> RawFd {
        self.wakeup_reader.as_raw_fd()
    }

    /// Every completion since the last call. The descriptor is drained first, so one pushed
    /// meanwhile always leaves it readable.
    pub fn take(&self) -> Vec<(u64, T)> {
        let mut sink = [0u8; 64];
        while let Ok(n) = (&self.wakeup_reader).read(&mut sink) {
            if n == 0 {
                break;
            }
        }
        match self.pending.lock() {
            Ok(mut pending) => std::mem::take(&mut *pending),
            Err(_) => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_pushes_is_one_wake_up_until_taken() {
        let queue = CompletionQueue::new().unwrap();
        queue.push(1, "a");
        queue.push(2, "b");
        let mut reader = queue.wakeup_reader.try_clone().unwrap();
        let mut bytes = [0u8; 8];
        assert_eq!(reader.read(&mut bytes).unwrap(), 1);
        assert_eq!(queue.take(), vec![(1, "a"), (2, "b")]);
        assert!(queue.take().is_empty());
        queue.push(3, "c");
        assert_eq!(queue.take(), vec![(3, "c")]);
        // take() drained the wake-up of the last push.
        assert!(reader.read(&mut bytes).is_err());
    }
}
