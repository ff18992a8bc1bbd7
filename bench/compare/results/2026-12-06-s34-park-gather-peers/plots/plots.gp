set terminal pngcairo size 900,600 noenhanced
set logscale xy
set grid
set key top left
set xlabel 'size (full buffer)'
set xtics ('8 B' 8, '64 B' 64, '1 KiB' 1024, '16 KiB' 16384, '256 KiB' 262144, '4 MiB' 4194304, '64 MiB' 67108864)
set output 'tcp4_gather_busbw.png'
set title 'gather, 4 ranks (oversubscribed), TCP over loopback'
set ylabel 'bus bandwidth (GB/s)'
plot 'tcp4_gather_cohort.dat' using 1:3 with linespoints title 'cohort', 'tcp4_gather_ompi.dat' using 1:3 with linespoints title 'Open MPI'
set output 'tcp4_gather_lat.png'
set title 'gather, 4 ranks (oversubscribed), TCP over loopback'
set ylabel 'time per op (us)'
plot 'tcp4_gather_cohort.dat' using 1:2 with linespoints title 'cohort', 'tcp4_gather_ompi.dat' using 1:2 with linespoints title 'Open MPI'
set output 'netns4_gather_busbw.png'
set title 'gather, 4 ranks (oversubscribed), 2 in each of 2 network namespaces, TCP everywhere'
set ylabel 'bus bandwidth (GB/s)'
plot 'netns4_gather_cohort.dat' using 1:3 with linespoints title 'cohort', 'netns4_gather_ompi.dat' using 1:3 with linespoints title 'Open MPI'
set output 'netns4_gather_lat.png'
set title 'gather, 4 ranks (oversubscribed), 2 in each of 2 network namespaces, TCP everywhere'
set ylabel 'time per op (us)'
plot 'netns4_gather_cohort.dat' using 1:2 with linespoints title 'cohort', 'netns4_gather_ompi.dat' using 1:2 with linespoints title 'Open MPI'
